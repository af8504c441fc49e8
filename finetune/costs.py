"""Which records a page may show: those made under the cost model gplace estimates with now.

Step times of two cost models (gplace.cost.COST_MODEL_VERSION) are not comparable, so every
record the studies write (pretrain.domains, pretrain.headroom, finetune.outside,
finetune.optimality) carries ``"costs"``, the version that made it; a study recomputes a record
of another version whole instead of adding columns to it, and finetune.bars leaves such records
out. A record without the field predates it: cost model 1. The test split's CSVs
(finetune.study) carry no field: finetune/run.sh rebuilds them whole.
"""

from __future__ import annotations

from gplace.cost import COST_MODEL_VERSION

FIELD = "costs"
UNMARKED = 1  # the cost model of records written before the field


def costs_of(record: dict) -> int:
    return int(record.get(FIELD, UNMARKED))


def is_current(record: dict) -> bool:
    return costs_of(record) == COST_MODEL_VERSION


def current(records) -> list[dict]:
    """The records made under today's cost model."""
    return [r for r in records if is_current(r)]


def stamped(record: dict) -> dict:
    """``record`` marked as made under today's cost model."""
    return {**record, FIELD: COST_MODEL_VERSION}
