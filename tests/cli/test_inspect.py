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


def test_a_saved_models_signature_is_chosen_by_option_and_named(capsys, tmp_path, tf2_step,
                                                                monkeypatch, save_with_predict):
    monkeypatch.setenv("GPLACE_CACHE_DIR", str(tmp_path / "cache"))
    path = save_with_predict(tf2_step, tmp_path / "m")
    assert main(["inspect", str(path)]) == 0
    note = [line for line in capsys.readouterr().out.splitlines() if line.startswith("note")]
    assert note and "signature 'train'" in note[0] and "no optimizer update" not in note[0]
    assert main(["inspect", str(path), "--signature", "predict"]) == 0
    note = [line for line in capsys.readouterr().out.splitlines() if line.startswith("note")]
    assert "signature 'predict'" in note[0] and "no optimizer update" in note[0]
    assert main(["inspect", str(path), "--signature", "nope"]) == 2
    assert capsys.readouterr().err.strip().endswith("no signature 'nope'; it holds predict, train")
    pb = ROOT / "gplace" / "examples" / "small_resnet.pb"
    assert main(["inspect", str(pb), "--signature", "train"]) == 2
    assert "the graph has none" in capsys.readouterr().err
