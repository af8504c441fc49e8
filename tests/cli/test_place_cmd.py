"""gplace place's printed summary: text and --json from a PlaceSummary (no placement run)."""

import json
from pathlib import Path

from gplace.cli.place_cmd import render
from gplace.summary import BestHeuristic

from tests.test_summary import JSON_KEYS, summary


def test_json_is_the_summary_plus_the_output_folder():
    out = json.loads(render(summary(), [Path("/x/placed.pb"), Path("/x/report.html")], True))
    assert list(out) == JSON_KEYS + ["out"]
    assert out["out"] == "/x" and out["best_heuristic"]["name"] == "heft"
    assert json.loads(render(summary(), None, True))["out"] is None


def test_text_names_the_finder_and_the_speedup():
    text = render(summary(), [Path("/x/placed.pb")], False)
    assert "step time        20.000 ms (simulated, an estimate); found by heft" in text
    assert "single device    50.000 ms (2.50x slower)" in text
    assert "best heuristic   heft 25.000 ms" in text
    assert text.splitlines()[-1] == "wrote            /x/placed.pb"


def test_text_without_a_zero_shot_or_a_fitting_heuristic():
    text = render(summary(zero_shot_step_time_s=None, best_heuristic=BestHeuristic(None, None)),
                  None, False)
    assert "zero-shot        -" in text
    assert "best heuristic   none fits in memory" in text
    assert text.splitlines()[-1] == "wrote            nothing"


def test_text_and_json_when_the_single_device_does_not_fit():
    """An infinite step time reads "does not fit in memory" in text and null in JSON (JSON has
    no Infinity)."""
    s = summary(single_device_s=float("inf"))
    assert "single device    does not fit in memory" in render(s, None, False)
    text = render(s, None, True)
    assert "Infinity" not in text and json.loads(text)["single_device_s"] is None


def test_an_opgraph_saved_by_inspect_places_as_its_graph_does(tmp_path, capsys):
    """`inspect --save` writes the imported OpGraph; `place` takes it and gives the graph
    file's placement, and its placed.pb from that file (still where the OpGraph says)."""
    from gplace.cli import main
    example = Path(__file__).resolve().parents[2] / "gplace" / "examples" / "small_resnet.pb"
    assert main(["inspect", str(example), "--save", str(tmp_path / "g.npz")]) == 0
    assert f"saved          {tmp_path / 'g.npz'}" in capsys.readouterr().out
    times = []
    for model, out in ((example, "a"), (tmp_path / "g.npz", "b")):
        assert main(["place", str(model), "--out", str(tmp_path / out), "--json",
                     "--polish", "0"]) == 0
        times.append(json.loads(capsys.readouterr().out)["step_time_s"])
    assert times[0] == times[1]
    placed = [(tmp_path / out / "placed.pb").read_bytes() for out in ("a", "b")]
    assert placed[0] == placed[1]
    assert json.loads((tmp_path / "a" / "placement.json").read_text())["placement"] == \
        json.loads((tmp_path / "b" / "placement.json").read_text())["placement"]
