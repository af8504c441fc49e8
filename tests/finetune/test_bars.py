"""The pretraining bars are computed from the records, per case with seeds averaged in log
space, and a bar met overall but missed by a domain says which."""

import csv

import pytest

from finetune import bars


def test_a_case_is_the_geometric_mean_of_its_seeds():
    records = [{"graph": "g", "cluster": "c", "x": 0.5}, {"graph": "g", "cluster": "c", "x": 2.0},
               {"graph": "h", "cluster": "c", "x": 0.9}]
    assert bars.per_case(records, lambda r: r["x"]) == pytest.approx([1.0, 0.9])


def test_the_verdict_names_the_parts_that_miss_the_bar():
    assert bars.verdict(0.95, 0.92) == "**no**"
    assert bars.verdict(0.90, 0.92) == "yes"
    assert bars.verdict(0.90, 0.92, {"a": 0.85, "b": 0.93}) == "yes over all; b no"


def test_the_rows_come_from_the_test_records(tmp_path, monkeypatch):
    from finetune import optimality
    from pretrain import domains, headroom
    path = tmp_path / "results_test.csv"
    cols = ["graph", "cluster", "seed", "best heuristic", "ft 100", "untrained ft 100",
            "ft 300 +h", "hill 2400 +h", "anneal 2400 +h", "lower bound"]
    with path.open("w") as f:
        w = csv.writer(f)
        w.writerow(cols)
        for seed in (0, 1):  # pretrained 0.8x untrained at 100 samples; ft 300 +h 0.95x search
            w.writerow(["g", "hdp-8gpu", seed, 1.0, 0.8, 1.0, 0.95, 1.0, 1.2, 0.5])
    monkeypatch.setattr(bars, "TEST", path)
    monkeypatch.setattr(bars, "TEST_ZERO", tmp_path / "none.csv")
    monkeypatch.setattr(domains, "RECORDS", tmp_path / "none.jsonl")
    monkeypatch.setattr(headroom, "RECORDS", tmp_path / "none.jsonl")
    monkeypatch.setattr(optimality, "RECORDS", tmp_path / "none.jsonl")
    rows = {bar: (figure, met) for bar, figure, met in bars.rows()}
    ablation = rows["pretrained / untrained at 100 samples without heuristic starts <= 0.85, "
                    "test split"]
    assert ablation[0].startswith("**0.800 (better on 1 of 1)**") and ablation[1] == "yes"
    search = next(v for k, v in rows.items() if k.startswith("`ft 300 +h` <= 0.90x"))
    assert search[0].startswith("0.950 (at or below on 1 of 1); 1.90x the lower bound")
    assert search[1] == "**no**"
    assert rows["hdp-8gpu (unseen): pretrained / untrained at 100 samples <= 0.95"][1] == "yes"
