"""finetune.outside --policy: another policy's columns on the recorded cases."""

import io
import json

import pytest

from gplace.cost import COST_MODEL_VERSION


def test_another_policy_file_replays_the_recorded_cases(tmp_path, monkeypatch):
    from finetune import outside
    from finetune.study import FINETUNE_TAG
    from gplace.gnn.placer import SHIPPED
    from pretrain.domains import policy_digest
    case = ("capsnet_b16_32_rgb", "post-4gpu", 0)  # the smallest graph, 690 ops
    record = next(r for r in outside.load_records()
                  if (r["graph"], r["cluster"], r["seed"]) == case)
    if record["policy"] != policy_digest(SHIPPED) or record.get("finetune") != FINETUNE_TAG:
        pytest.skip("finetune/outside.jsonl was placed by another policy file or other "
                    "fine-tuning settings: rerun `python -m finetune.outside`")
    records = tmp_path / "outside.jsonl"
    records.write_text(json.dumps(record) + "\n")
    monkeypatch.setattr(outside, "RECORDS", records)
    monkeypatch.setattr(outside, "RUNS", tmp_path / "runs")
    # the shipped policy under another name places the case as the record says
    copy = tmp_path / "same.pt"
    copy.write_bytes(SHIPPED.read_bytes())
    (again,) = outside.run_other(copy, [0], io.StringIO())
    for column in outside.SHIPPED_COLUMNS:
        assert again[column] == pytest.approx(record[column], rel=1e-9), column
    assert again["untrained ft 100"] == record["untrained ft 100"]  # kept, not rerun
    # resumed from its records file, and cases of other seeds are left out
    assert outside.run_other(copy, [0], io.StringIO()) == [again]
    assert outside.run_other(copy, [1], io.StringIO()) == []


def test_a_run_recomputes_only_what_changed(tmp_path, monkeypatch):
    """Records of another policy file get the shipped columns again, records of other
    fine-tuning settings both networks' columns; the local searches are kept. A record of
    another cost model is made again whole, in its place."""
    from finetune import outside
    from finetune.study import FINETUNE_TAG
    from gplace.gnn.placer import SHIPPED
    from pretrain.domains import policy_digest
    digest = policy_digest(SHIPPED)
    base = {"family": "f", "units": 1, "best heuristic": 1.0, "zero-shot": 0.9, "ft 100": 0.9,
            "untrained ft 100": 0.9, "hill 2400 +h": 0.5, "commit": "c0", "wall_s": 1.0,
            "costs": COST_MODEL_VERSION}
    from datasets.outside import OUTSIDE
    names = [s.name for s in OUTSIDE][:4]
    records = [{**base, "graph": names[0], "cluster": "hetero", "seed": 0, "policy": digest,
                "finetune": FINETUNE_TAG},
               {**base, "graph": names[1], "cluster": "hetero", "seed": 0, "policy": "other",
                "finetune": FINETUNE_TAG},
               {**base, "graph": names[2], "cluster": "hetero", "seed": 0, "policy": digest},
               {**base, "graph": names[3], "cluster": "hetero", "seed": 0, "policy": digest,
                "finetune": FINETUNE_TAG, "costs": 1}]
    path = tmp_path / "outside.jsonl"
    path.write_text("".join(json.dumps(r) + "\n" for r in records))
    monkeypatch.setattr(outside, "RECORDS", path)
    monkeypatch.setattr(outside, "graph_file", lambda spec, log: tmp_path / "none.pb")
    calls = []

    def fake(spec, graph, cluster, seed, columns="all", policy=None):
        calls.append((spec.name, columns))
        whole = ({"graph": spec.name, "cluster": cluster, "seed": seed, "units": 2,
                  "best heuristic": 2.0, "zero-shot": 1.8} if columns == "all" else {})
        return {**whole, "ft 100": 0.8, "untrained ft 100": 0.7, "policy": digest,
                "finetune": FINETUNE_TAG}

    monkeypatch.setattr(outside, "evaluate", fake)
    outside.run([], io.StringIO())
    assert calls == [(names[1], "shipped"), (names[2], "finetune"), (names[3], "all")]
    after = {r["graph"]: r for r in outside.load_records()}
    assert len(outside.load_records()) == 4
    assert after[names[3]]["costs"] == COST_MODEL_VERSION and "hill 2400 +h" not in after[names[3]]
    assert after[names[2]]["hill 2400 +h"] == 0.5 and after[names[2]]["finetune"] == FINETUNE_TAG
    assert after[names[0]] == records[0]
    outside.run([], io.StringIO())
    assert len(calls) == 3  # nothing left to do
