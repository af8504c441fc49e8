"""Records of another cost model: not loaded as done, replaced in place when made again."""

import json

from finetune.costs import current, is_current, stamped
from gplace.cost import COST_MODEL_VERSION


def test_an_unmarked_record_is_of_cost_model_1():
    assert not is_current({"x": 1}) or COST_MODEL_VERSION == 1
    assert is_current(stamped({"x": 1}))
    assert current([{"x": 1}, stamped({"x": 2}), {"x": 3, "costs": 99}]) == [stamped({"x": 2})]


def test_an_optimality_case_of_another_cost_model_is_solved_again_in_its_place(tmp_path,
                                                                               monkeypatch):
    from finetune import optimality
    path = tmp_path / "optimality.jsonl"
    path.write_text(json.dumps({"key": "small a post-4gpu", "units": 40, "place ft 0": 2.0})
                    + "\n" + json.dumps(stamped({"key": "small b post-4gpu", "units": 40})) + "\n")
    monkeypatch.setattr(optimality, "RECORDS", path)
    assert list(optimality.load_records()) == ["small b post-4gpu"]  # a is to be made again
    assert len(optimality.load_records(every=True)) == 2
    optimality.append_record({"key": "small a post-4gpu", "units": 40, "place ft 0": 1.0})
    records = optimality.load_records()
    assert sorted(records) == ["small a post-4gpu", "small b post-4gpu"]
    assert records["small a post-4gpu"]["place ft 0"] == 1.0
    assert len(path.read_text().splitlines()) == 2


def test_a_held_out_case_of_another_cost_model_is_made_again_in_its_place(tmp_path,
                                                                          monkeypatch):
    from pretrain import domains
    path = tmp_path / "domains.jsonl"
    path.write_text(json.dumps({"key": "k", "domain": "attention", "x": 2.0}) + "\n")
    monkeypatch.setattr(domains, "RECORDS", path)
    domains.append_record({"key": "k", "domain": "attention", "x": 1.0})
    domains.append_record({"key": "j", "domain": "attention", "x": 3.0})
    rows = domains._raw_records()
    assert [(r["key"], r["x"]) for r in rows] == [("k", 1.0), ("j", 3.0)]
    assert all(is_current(r) for r in rows)
    assert domains.run_folder("attention", domains.Variant()).parts[-2] == \
        f"costs-{COST_MODEL_VERSION}"  # a held-out policy of another cost model is not reused
