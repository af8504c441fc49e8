"""finetune.outside --policy: another policy's columns on the recorded cases."""

import io
import json

import pytest


def test_another_policy_file_replays_the_recorded_cases(tmp_path, monkeypatch):
    from finetune import outside
    from gplace.gnn.placer import SHIPPED
    from pretrain.domains import policy_digest
    case = ("capsnet_b16_32_rgb", "post-4gpu", 0)  # the smallest graph, 690 ops
    record = next(r for r in outside.load_records()
                  if (r["graph"], r["cluster"], r["seed"]) == case)
    if record["policy"] != policy_digest(SHIPPED):
        pytest.skip("finetune/outside.jsonl was placed by another policy file than the "
                    "shipped one: rerun `python -m finetune.outside`")
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
