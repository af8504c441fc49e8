"""`gplace inspect`: a graph with TF1 loops is told how the simulator counts them."""

from pathlib import Path

from gplace.cli import main

ROOT = Path(__file__).resolve().parents[2]


def loops_line(capsys, path) -> str:
    assert main(["inspect", str(path)]) == 0
    return next(line for line in capsys.readouterr().out.splitlines() if line.startswith("loops"))


def test_a_looped_graph_is_told_how_its_loops_are_simulated(capsys, tmp_path):
    looped = ROOT / "datasets" / "corpus" / "rnn_loop_01.pb"
    loops = loops_line(capsys, looped)  # its profile beside it records the runs
    assert "up to 11 runs per op" in loops and "one trip" not in loops
    alone = tmp_path / "rnn_loop_01.pb"  # no profile: the loops count once
    alone.write_bytes(looped.read_bytes())
    loops = loops_line(capsys, alone)
    assert "simulated as one trip" in loops and not loops.startswith("loops          0 ")
    assert main(["inspect", str(ROOT / "gplace" / "examples" / "small_resnet.pb")]) == 0
    loops = next(line for line in capsys.readouterr().out.splitlines()
                 if line.startswith("loops"))
    assert loops == "loops          0 TF1 loop frames"
