"""finetune/memory.py's page from records: the geomean ratio and the counts per setting."""

from finetune import memory


def record(graph, fraction, finetune, arm, t):
    result = {"chosen": "gnn (zero-shot)"} if t is not None else {"error": "no placement fits"}
    return {"graph": graph, "fraction": fraction, "gpu_bytes": 10**8, "finetune": finetune,
            "arm": arm, "step_time_s": t, **result, "wall_s": 1.0, "commit": "abc1234",
            "best_heuristic_s": None}


def test_the_page_counts_faster_slower_and_none_fits():
    g = memory.GRAPHS
    records = [record(g[0], 0.5, 0, "full estimate", 0.2), record(g[0], 0.5, 0, "calibrated", 0.1),
               record(g[1], 0.5, 0, "full estimate", 0.1), record(g[1], 0.5, 0, "calibrated", 0.2),
               record(g[2], 0.5, 0, "full estimate", None), record(g[2], 0.5, 0, "calibrated", 0.3)]
    text = memory.page(records)
    assert "| 0.5 | 0 | 3 | 1.000 | 1 | 1 | 1, 0 |" in text  # geomean of 0.5 and 2
    assert "| none fits | none fits (-) | 300.00 ms (gnn (zero-shot)) | - |" in text
    assert "code at commit abc1234" in text
