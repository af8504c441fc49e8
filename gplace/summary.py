"""PlaceSummary: the figures of one ``gplace place`` run, as one typed, frozen record.

``place()`` builds it; the CLI prints it (``--json`` is :meth:`PlaceSummary.as_dict`), and
``placement.json`` and ``report.html`` read it by attribute. The dict keeps the keys and their
order of the ``--json`` output that scripts already read.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, NamedTuple


class BestHeuristic(NamedTuple):
    """The fastest feasible cheap heuristic; both fields None when none fits in memory."""

    name: str | None
    step_time_s: float | None


@dataclass(frozen=True)
class PlaceSummary:
    graph: str                   # OpGraph.meta["name"]
    ops: int                     # ops in the graph
    units: int                   # units of placement (colocation groups) of the problem
    cluster: str                 # cluster name
    cluster_choice: str          # one sentence: which cluster and why
    devices: tuple[str, ...]     # device names, in cluster order
    step_time_s: float           # the returned placement (simulated or measured, see step_times)
    single_device_s: float       # everything on the single fastest device ("single" heuristic)
    best_heuristic: BestHeuristic
    lower_bound_s: float         # from the cost model, even when step times are measured
    zero_shot_step_time_s: float | None  # the policy's zero-shot placement, before fine-tuning
    samples: int                 # measured placements charged to the fine-tuning budget
    wall_s: float                # seconds place() took (left out of placement.json)
    measure: str                 # "sim" or "real"
    costs: str                   # "measured", or which devices have roofline estimates
    step_times: str              # "simulated, an estimate" or "measured on hardware"
    groups: int                  # colocation groups (= units: place() plans at that grain)
    chosen: str                  # "gnn (zero-shot)", "gnn (fine-tuned)" or a heuristic's name
    left_out: str = ""           # ops of the file outside the training step, e.g. "variable
                                 # initializers 110" (gplace.importer.step); "" when none
    warning: str = ""            # what TensorFlow would not run as placed; "" when nothing

    @property
    def speedup_vs_single(self) -> float:
        """How many times faster than the single fastest device (nan without a step time)."""
        return _ratio(self.single_device_s, self.step_time_s)

    @property
    def speedup_vs_best_heuristic(self) -> float:
        """How many times faster than the best heuristic (nan when none fits)."""
        return _ratio(self.best_heuristic.step_time_s, self.step_time_s)

    def as_dict(self) -> dict[str, Any]:
        """Plain JSON types, keys in field order (the ``--json`` output)."""
        out = {name: getattr(self, name) for name in self.__dataclass_fields__}
        out["devices"] = list(self.devices)
        out["best_heuristic"] = self.best_heuristic._asdict()
        for key in ("left_out", "warning"):
            if not out[key]:
                del out[key]
        return out

    to_json = as_dict


def _ratio(slower: float | None, faster: float | None) -> float:
    if not slower or not faster:
        return float("nan")
    return slower / faster
