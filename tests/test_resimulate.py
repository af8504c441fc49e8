"""Re-scoring a calibration run (gplace.resimulate) on the committed quick_mlp run: no
TensorFlow process starts."""

from pathlib import Path

import numpy as np
import pytest

RUN = Path(__file__).resolve().parents[1] / "calibration"


@pytest.fixture
def mlp_run(tmp_path):
    """The committed calibration run cut to quick_mlp, in a folder of its own."""
    import json
    import shutil
    if not (RUN / "graphs" / "quick_mlp.pb").is_file():
        pytest.skip("calibration/graphs/quick_mlp.pb is absent")
    run = json.loads((RUN / "calibration.json").read_text())
    run["graphs"] = [g for g in run["graphs"] if g["name"] == "quick_mlp"]
    (tmp_path / "profiles").mkdir()
    shutil.copy(RUN / "profiles" / "quick_mlp.profile.json.gz", tmp_path / "profiles")
    (tmp_path / "calibration.json").write_text(json.dumps(run))
    return tmp_path, run


def test_resimulate_keeps_the_real_figures_and_rescores_the_simulator(mlp_run):
    import dataclasses
    import json
    from gplace.calibrate import CalibrateConfig, GraphSource
    from gplace.resimulate import resimulate
    out, run = mlp_run
    source = [GraphSource("quick_mlp", RUN / "graphs" / "quick_mlp.pb", "mlp")]
    before = run["graphs"][0]
    config = CalibrateConfig()
    # the committed run, scored with the model it records: its figures come back
    g = resimulate(source, out, "local-procs", config).graphs[0]
    assert g.simulated_s.tolist() == [p["simulated_s"] for p in before["placements"]]
    assert (g.kendall_tau, g.repeat_tau) == (before["kendall_tau"], before["repeat_tau"])
    # the link model: new simulated times and tau, the same placements and real figures
    link = resimulate(source, out, "local-procs",
                      dataclasses.replace(config, transfer_cpu_at="link")).graphs[0]
    np.testing.assert_array_equal(link.placements, g.placements)
    np.testing.assert_array_equal(link.measured_s, g.measured_s)
    assert (link.simulated_s < g.simulated_s).sum() > 0 and link.kendall_tau != g.kendall_tau
    # a run that predates stored placements: rebuilt as it made them (on its own model)
    older = json.loads((out / "calibration.json").read_text())
    for p in older["graphs"][0]["placements"]:
        del p["units"]
    (out / "calibration.json").write_text(json.dumps(older))
    rebuilt = resimulate(source, out, "local-procs", config).graphs[0]
    np.testing.assert_array_equal(rebuilt.placements, g.placements)
    assert rebuilt.simulated_s.tolist() == g.simulated_s.tolist()


def test_resimulate_refuses_what_is_not_a_run(tmp_path):
    from gplace.resimulate import resimulate
    from gplace.errors import ConfigError
    (tmp_path / "calibration.json").write_text("{}")
    with pytest.raises(ConfigError, match="not a calibration run to re-simulate"):
        resimulate([], tmp_path)


def test_resimulate_says_what_is_wrong_with_a_damaged_run(mlp_run):
    import json
    from gplace.calibrate import GraphSource
    from gplace.resimulate import resimulate
    from gplace.errors import ConfigError
    out, run = mlp_run
    source = [GraphSource("quick_mlp", RUN / "graphs" / "quick_mlp.pb", "mlp")]
    del run["graphs"][0]["repeat_tau"]
    (out / "calibration.json").write_text(json.dumps(run))
    with pytest.raises(ConfigError, match="graph quick_mlp: not a calibration record.*repeat_tau"):
        resimulate(source, out)
    run["graphs"][0]["repeat_tau"] = 0.5
    run["graphs"][0]["placements"][3]["units"] = [0, 1]
    (out / "calibration.json").write_text(json.dumps(run))
    with pytest.raises(ConfigError, match="not a calibration record"):
        resimulate(source, out)
    run["graphs"][0]["units"] = 16
    (out / "calibration.json").write_text(json.dumps(run))
    with pytest.raises(ConfigError, match="coarsened to 16 units.*pass --units 16"):
        resimulate(source, out)


def test_a_run_without_its_profiles_is_refused_before_any_graph_is_built(tmp_path, capsys,
                                                                          monkeypatch):
    import gplace.cli.calibrate_cmd as cmd
    from gplace.cli import main
    (tmp_path / "calibration.json").write_text('{"graphs": [{"name": "quick_mlp"}]}')
    monkeypatch.setattr(cmd, "resolve_graph", lambda *a: pytest.fail("built a graph first"))
    assert main(["calibrate", "--resimulate", "--out", str(tmp_path), "--cluster",
                 "local-procs"]) == 2
    assert "profiles/quick_mlp.profile.json.gz is missing" in capsys.readouterr().err
