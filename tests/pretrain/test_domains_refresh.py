"""pretrain.domains.refresh_finetune: only records of other fine-tuning settings are redone;
records of another cost model are left for the study to make again whole."""

import io
import json

import pytest

from gplace.cost import COST_MODEL_VERSION


def test_records_of_other_finetuning_settings_get_every_network_column_again(tmp_path,
                                                                              monkeypatch):
    import finetune.study as study
    from pretrain import domains
    if not (domains.ROOT / "pretrain" / "corpus139").exists():
        pytest.skip("pretrain/corpus139 is absent")
    graph = json.loads(domains.RECORDS.read_text().splitlines()[0])["graph"]
    monkeypatch.setattr(domains, "RUNS", tmp_path / "runs")
    folder = domains.run_folder("attention", domains.Variant())
    folder.mkdir(parents=True)
    (folder / "policy.pt").write_bytes(b"a held-out policy")
    digest = domains.policy_digest(folder / "policy.pt")
    base = {"variant": "linear", "domain": "attention", "graph": graph, "cluster": "hetero",
            "seed": 0, "policy": digest, "hill 2400 +h": 0.5, "commit": "c0",
            "costs": COST_MODEL_VERSION}
    records = [{**base, "key": "current", "finetune": study.FINETUNE_TAG},
               {**base, "key": "old"},
               {**base, "key": "gone", "policy": "another"},
               {**base, "key": "cost model 1", "costs": 1}]
    path = tmp_path / "domains.jsonl"
    path.write_text("".join(json.dumps(r) + "\n" for r in records))
    monkeypatch.setattr(domains, "RECORDS", path)
    monkeypatch.setattr(domains, "networks",
                        lambda policy, seed: {"held-out": 1, "untrained": 2, "shipped": 3})
    monkeypatch.setattr(study, "build_case", lambda entry, cluster: (None, None, {}, 0.0))
    monkeypatch.setattr(study, "without_heuristics", lambda problem, m, net, seed, tag: {
        f"{tag}zero-shot": net, f"{tag}ft 100": net / 2})
    monkeypatch.setattr(study, "with_heuristics", lambda problem, m, heur, net, seed, tag: {
        f"{tag}ft 100 +h": net / 3, f"{tag}ft 300 +h": net / 4})
    log = io.StringIO()
    domains.refresh_finetune(log)
    after = {r["key"]: r for r in domains._raw_records()}
    assert after["current"] == records[0] and after["gone"] == records[2]
    assert after["cost model 1"] == records[3]
    assert "gone or changed" in log.getvalue()
    old = after["old"]
    assert set(domains.NETWORK_COLUMNS) <= set(old) and "shipped ft 300 +h" not in old
    assert old["held-out ft 100"] == 0.5 and old["untrained ft 300 +h"] == 0.5
    assert old["hill 2400 +h"] == 0.5 and old["finetune"] == study.FINETUNE_TAG
