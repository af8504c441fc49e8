"""`gplace simulate` and `gplace clusters` in a subprocess, as a user runs them (CleanRL style)."""

import json
import subprocess
import sys

import pytest

from gplace.cluster import preset_names
from gplace.sim.random_graphs import RandomDagConfig, random_dag


def gplace(*args, cwd=None):
    return subprocess.run([sys.executable, "-m", "gplace", *map(str, args)], capture_output=True,
                          text=True, timeout=300, cwd=cwd)


@pytest.fixture(scope="module")
def model(tmp_path_factory):
    path = tmp_path_factory.mktemp("sim") / "g.npz"
    random_dag(RandomDagConfig(ops=60), 3).save(path)
    return path


def test_simulate_random_on_every_preset(model, tmp_path):
    """One subprocess runs the CLI entry point once per preset (each run ~1 s; a process each
    would spend most of the test starting Python)."""
    script = ("import sys; from gplace.cli import main\n"
              "for c in sys.argv[2:]:\n"
              "    rc = main(['simulate', sys.argv[1], '--cluster', c, '--random', '8', '--seed',"
              " '1', '--json', '--trace', c + '.json'])\n"
              "    assert rc == 0\n")
    presets = preset_names()
    out = subprocess.run([sys.executable, "-c", script, str(model), *presets], cwd=tmp_path,
                         capture_output=True, text=True, timeout=300)
    assert out.returncode == 0, out.stderr
    reports = [json.loads(line) for line in out.stdout.splitlines()]
    assert [r["cluster"] for r in reports] == presets
    for r, cluster in zip(reports, presets):
        assert 0 < r["lower_bound_s"] <= r["step_time_s"]
        assert r["random"]["best_step_time_s"] == r["step_time_s"] <= r["random"]["median_step_time_s"]
        assert r["sim_events_per_s"] > 0 and isinstance(r["oom"], bool)
        for dev in r["devices"].values():
            assert {"busy_s", "peak_bytes", "capacity_bytes"} <= set(dev)
        assert r["estimated_devices"]  # no profile given: every device is a roofline estimate
        events = json.loads((tmp_path / f"{cluster}.json").read_text())["traceEvents"]
        assert sum(e["ph"] == "X" and e["pid"] == 1 for e in events) == 60


def test_simulate_is_reproducible_and_reads_placement_files(model, tmp_path):
    a = json.loads(gplace("simulate", model, "--cluster", "post-2gpu", "--random", 5, "--seed", 7,
                          "--json").stdout)
    b = json.loads(gplace("simulate", model, "--cluster", "post-2gpu", "--random", 5, "--seed", 7,
                          "--json").stdout)
    assert a["step_time_s"] == b["step_time_s"] and a["random"] == {**b["random"], "seconds": a["random"]["seconds"]}
    from gplace.graph import OpGraph
    names = OpGraph.load(model).names.tolist()
    placement = tmp_path / "p.json"
    placement.write_text(json.dumps({"placement": {n: "gpu0" for n in names}}))
    out = gplace("simulate", model, "--cluster", "post-2gpu", "--placement", placement, "--json")
    r = json.loads(out.stdout)
    assert r["transfers"] == 0 and r["devices"]["gpu0"]["ops"] == 60
    tf_names = {n: "/job:localhost/replica:0/task:0/device:GPU:1" for n in names}
    placement.write_text(json.dumps(tf_names))
    r = json.loads(gplace("simulate", model, "--cluster", "post-2gpu", "--placement", placement,
                          "--json").stdout)
    assert r["devices"]["gpu1"]["ops"] == 60
    text = gplace("simulate", model, "--cluster", "post-2gpu", "--placement", placement)
    assert "step time" in text.stdout and "lower bound" in text.stdout


def _one_line_error(out, *needles):
    assert out.returncode == 2
    lines = out.stderr.strip().splitlines()
    assert len(lines) == 1 and "Traceback" not in out.stderr, out.stderr
    for needle in needles:
        assert needle in lines[0]


def test_unknown_cluster_lists_alternatives(model):
    _one_line_error(gplace("simulate", model, "--cluster", "nope", "--random", 2),
                    "'nope'", "post-4gpu", "nvlink-8gpu", "local")


def test_placement_that_splits_a_colocation_group(tmp_path):
    from gplace.graph import OpGraph
    g = OpGraph.from_lists([1e6] * 3, [4] * 3, [(0, 1), (1, 2)], group=[0, 0, 1])
    g.save(tmp_path / "g.npz")
    (tmp_path / "p.json").write_text(json.dumps({"op0": "gpu0", "op1": "gpu1", "op2": "cpu"}))
    _one_line_error(gplace("simulate", tmp_path / "g.npz", "--cluster", "post-2gpu",
                           "--placement", tmp_path / "p.json"), "colocation group 0")


def test_bad_cluster_yaml_names_file_and_field(model, tmp_path):
    bad = tmp_path / "bad.yaml"
    bad.write_text("name: x\ndevices:\n  - {name: a, tf_device: /device:CPU:0, kind: cpu,"
                   " peak_flops: fast, mem_bandwidth: 1e9, memory_bytes: 1e9}\n"
                   "default_link: {bandwidth: 1e9, latency_s: 0}\n")
    _one_line_error(gplace("simulate", model, "--cluster", bad, "--random", 1),
                    "bad.yaml", "peak_flops")


def test_clusters_lists_presets():
    out = gplace("clusters", "--json")
    assert out.returncode == 0, out.stderr
    names = {c["name"] for c in json.loads(out.stdout)}
    assert {"post-2gpu", "post-4gpu", "hdp-8gpu", "nvlink-8gpu", "hetero", "local"} <= names
    text = gplace("clusters", "post-4gpu")
    assert "4x k80" in text.stdout


def test_simulate_costs_by_the_profile_beside_the_model_and_reads_pt2_options():
    """Without --cost-model, simulate costs a model as `gplace place` does: the measured
    profile beside it for its devices' kind (the example's SGD step: every op measured); a
    .pt2 takes --optimizer (Adam's updates add ops the SGD profile lacks: those are estimated);
    the option on a TensorFlow model is one line and exit 2."""
    from pathlib import Path
    examples = Path(__file__).resolve().parents[2] / "gplace" / "examples" / "torch"
    args = ["simulate", examples / "cnn.pt2", "--cluster", "local-procs", "--random", "2",
            "--json"]
    sgd, adam = gplace(*args), gplace(*args, "--optimizer", "adam")
    assert sgd.returncode == 0 and adam.returncode == 0, sgd.stderr + adam.stderr
    sgd, adam = json.loads(sgd.stdout), json.loads(adam.stdout)
    assert sgd["estimated_devices"] == [] and sgd["cost_notes"] == [
        "w0 (cpu): measured", "w1 (cpu): measured"]
    assert adam["ops"] > sgd["ops"] and adam["estimated_devices"] == ["w0", "w1"]
    bad = gplace("simulate", examples.parent / "small_resnet.pb", "--cluster", "post-4gpu",
                 "--random", "1", "--optimizer", "adam")
    assert bad.returncode == 2 and bad.stderr.strip().count("\n") == 0
    assert "apply to PyTorch (.pt2) models only" in bad.stderr


def test_simulate_takes_a_pt2_placements_optimizer_from_its_placement_json(tmp_path):
    """placement.json of an Adam step names Adam's state ops; simulate builds that step
    without being told --optimizer again."""
    from pathlib import Path
    model = Path(__file__).resolve().parents[2] / "gplace" / "examples" / "torch" / "cnn.pt2"
    placed = gplace("place", model, "--cluster", "post-4gpu", "--optimizer", "adam",
                    "--polish", "0", "--out", tmp_path / "out", "--json")
    assert placed.returncode == 0, placed.stderr
    step = json.loads(placed.stdout)["step_time_s"]
    sim = gplace("simulate", model, "--cluster", "post-4gpu", "--placement",
                 tmp_path / "out" / "placement.json", "--json")
    assert sim.returncode == 0, sim.stderr
    assert json.loads(sim.stdout)["step_time_s"] == pytest.approx(step, rel=1e-9)


def test_simulate_takes_the_cluster_a_placement_json_was_placed_on(tmp_path):
    """--cluster defaults to placement.json's own; another one is simulated with a note; no
    placement.json and no --cluster is one line."""
    from pathlib import Path
    model = Path(__file__).resolve().parents[2] / "gplace" / "examples" / "small_resnet.pb"
    placed = gplace("place", model, "--cluster", "hetero", "--polish", "0", "--out",
                    tmp_path / "out", "--json")
    assert placed.returncode == 0, placed.stderr
    placement = tmp_path / "out" / "placement.json"
    same = gplace("simulate", model, "--placement", placement, "--json")
    assert same.returncode == 0, same.stderr
    assert json.loads(same.stdout)["step_time_s"] == pytest.approx(
        json.loads(placed.stdout)["step_time_s"], rel=1e-9)
    other = gplace("simulate", model, "--placement", placement, "--cluster", "hdp-8gpu")
    assert other.returncode == 0 and "was placed on cluster 'hetero', whose devices, links or " \
        "memory differ from hdp-8gpu's; simulating it on hdp-8gpu" in other.stderr
    none = gplace("simulate", model, "--random", "1")
    assert none.returncode == 2 and "--cluster" in none.stderr


def test_simulate_uses_the_cluster_as_it_was_placed_on(tmp_path):
    """placement.json records the cluster's devices, links and memory limits: a YAML named like
    a preset, with a faster link (over which the placement splits the graph), is simulated as
    placed, not as the preset."""
    from pathlib import Path
    root = Path(__file__).resolve().parents[2]
    model = root / "gplace" / "examples" / "small_resnet.pb"
    text = (root / "gplace" / "clusters" / "post-2gpu.yaml").read_text()
    fast = tmp_path / "mine.yaml"
    fast.write_text(text.replace("default_link: {bandwidth: 12.0e9",
                                 "default_link: {bandwidth: 1.0e12"))
    placed = gplace("place", model, "--cluster", fast, "--memory-limit", "gpu0=3GB",
                    "--polish", "0", "--out", tmp_path / "out", "--json")
    assert placed.returncode == 0, placed.stderr
    placement = tmp_path / "out" / "placement.json"
    caps = {d["name"]: d["memory_bytes"] for d in json.loads(placement.read_text())["cluster"][
        "devices"]}
    assert caps["gpu0"] == 3 * 10**9 and caps["gpu1"] == 12 * 10**9
    same = gplace("simulate", model, "--placement", placement, "--json")
    assert same.returncode == 0, same.stderr
    assert json.loads(same.stdout)["step_time_s"] == pytest.approx(
        json.loads(placed.stdout)["step_time_s"], rel=1e-9)
    preset = gplace("simulate", model, "--placement", placement, "--cluster", "post-2gpu",
                    "--json")
    assert json.loads(preset.stdout)["step_time_s"] != pytest.approx(
        json.loads(placed.stdout)["step_time_s"], rel=1e-3)


def test_a_none_batch_is_placed_at_the_unknown_dim_given_and_simulated_so_again(tmp_path):
    """place says how it sized a None batch and takes --unknown-dim; placement.json records
    the size, so simulate --placement imports the graph as it was placed."""
    from gplace.tfimport import tensorflow
    from tests.importer.test_step import none_batch_step
    tensorflow().io.write_graph(none_batch_step(256, 512), str(tmp_path), "g.pb", as_text=False)
    model = tmp_path / "g.pb"
    one = gplace("place", model, "--polish", "0", "--out", tmp_path / "one")
    assert one.returncode == 0, one.stderr
    assert "1 input with unknown dimensions (x) given size 1 in each: a None batch counts as " \
        "a batch of 1; give the batch size when the graph is imported (--unknown-dim N" \
        in one.stdout
    big = gplace("place", model, "--unknown-dim", "4096", "--polish", "0", "--out",
                 tmp_path / "big", "--json")
    assert big.returncode == 0, big.stderr
    placement = tmp_path / "big" / "placement.json"
    assert json.loads(placement.read_text())["unknown_dim"] == 4096
    sim = gplace("simulate", model, "--placement", placement, "--json")
    assert sim.returncode == 0, sim.stderr
    step = json.loads(big.stdout)["step_time_s"]
    assert json.loads(sim.stdout)["step_time_s"] == pytest.approx(step, rel=1e-9)
    assert step > 10 * json.loads(gplace("simulate", model, "--placement", tmp_path / "one" /
                                          "placement.json", "--json").stdout)["step_time_s"]
    saved = gplace("inspect", model, "--save", tmp_path / "g.npz")
    assert saved.returncode == 0, saved.stderr
    imported = gplace("place", tmp_path / "g.npz", "--unknown-dim", "8")
    assert imported.returncode == 2 and "--unknown-dim sizes the unknown dimensions of a " \
        "TensorFlow graph as it is imported" in imported.stderr
