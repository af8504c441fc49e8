"""The PyTorch specialization page: its figures are the records' ratios."""

from pretrain import specialize_torch as st


def record(graph, cluster, seed, times):
    return {"key": f"{graph} {cluster} {seed}", "graph": graph, "cluster": cluster,
            "seed": seed, "units": 100, "steps": 400, "mine": 4, "best heuristic": 1.0,
            "specialized minutes": 3.0, "scratch minutes": 3.5, "local search": 0.9,
            **{f"{arm} {col}": t for (arm, col), t in times.items()}}


def test_the_page_gives_each_ratio_as_the_geomean_of_the_cases(tmp_path, monkeypatch):
    monkeypatch.setattr(st, "PAGE", tmp_path / "page.md")
    times = {(a, c): 1.0 for a in st.ARMS for c in ("zero-shot", "ft 100")}
    first = record("g", "post-4gpu", 0, {**times, ("specialized", "zero-shot"): 0.81})
    second = record("g", "hetero", 0, {**times, ("specialized", "zero-shot"): 1.0,
                                        ("shipped", "zero-shot"): 1.25})
    st.write_page([first, second], "abc1234")
    text = (tmp_path / "page.md").read_text()
    assert "code at commit abc1234" in text and "**3.0 minutes**" in text
    rows = [line for line in text.splitlines() if line.startswith("| all (2) | zero-shot |")]
    # specialized / shipped: 0.81 and 0.8, geomean 0.805; scratch / specialized 1/0.81 and 1
    assert rows == ["| all (2) | zero-shot | 0.805 (2 of 2 below 1) | 1.111 (0 of 2 below 1) "
                    "| 1.118 (0 of 2 below 1) | 0.900 (1 of 2 below 1) | 1.118 | 0.900 |"]
    assert "the shipped policy was 1.118x its own network untrained" in " ".join(text.split())
    # against local search: the specialized zero-shot 0.81 / 0.9 and 1.0 / 0.9, geomean 1
    assert "| specialized | 1.000 (1 of 2 below 1) | 1.111 (0 of 2 below 1) |" in text
