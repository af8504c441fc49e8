"""`gplace inspect`: a graph with TF1 loops is told how the simulator counts them."""

from pathlib import Path

from gplace.cli import main

ROOT = Path(__file__).resolve().parents[2]


def test_a_looped_graph_is_told_that_its_loops_are_simulated_as_one_trip(capsys):
    assert main(["inspect", str(ROOT / "datasets" / "corpus" / "rnn_loop_01.pb")]) == 0
    loops = next(line for line in capsys.readouterr().out.splitlines()
                 if line.startswith("loops"))
    assert "simulated as one trip" in loops and not loops.startswith("loops          0 ")
    assert main(["inspect", str(ROOT / "gplace" / "examples" / "small_resnet.pb")]) == 0
    loops = next(line for line in capsys.readouterr().out.splitlines()
                 if line.startswith("loops"))
    assert loops == "loops          0 TF1 loop frames"
