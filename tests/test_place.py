"""gplace place: never slower than the heuristics, fits memory, exports a graph TF runs."""

import dataclasses
import json
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest
import torch

from gplace.errors import ConfigError, GplaceError
from gplace.gnn.policy import GNNPolicy
from tests.tf_run import run_orig_and_placed

EXAMPLE = Path(__file__).resolve().parents[1] / "gplace" / "examples" / "small_resnet.pb"


@pytest.fixture(scope="module")
def checkpoint(tmp_path_factory):
    torch.manual_seed(0)
    path = tmp_path_factory.mktemp("ckpt") / "policy.pt"
    GNNPolicy(hidden_channels=16, num_layers=2).save(path, meta={"steps": 0})
    return path


def test_place_is_never_slower_than_the_heuristics_and_fits(checkpoint):
    from gplace.place import place
    r = place(EXAMPLE, cluster="post-4gpu", checkpoint=checkpoint, finetune=20, progress=False)
    s = r.summary
    assert s.samples == 20 and s.cluster == "post-4gpu" and s.units == s.groups
    assert s.step_time_s <= s.best_heuristic.step_time_s
    assert s.lower_bound_s <= s.step_time_s
    assert s.chosen in set(r.heuristics) | {"gnn (zero-shot)", "gnn (fine-tuned)"}
    from gplace.sim import FastSimulator
    sim = FastSimulator(r.problem).run(r.unit_placement)
    assert not sim.oom and sim.step_time_s == pytest.approx(r.step_time_s)


def test_python_api_places_a_graph_def(checkpoint):
    import gplace
    from gplace.tfimport import tensorflow
    gd = tensorflow().compat.v1.GraphDef()
    gd.ParseFromString(EXAMPLE.read_bytes())
    placer = gplace.load(checkpoint)
    from gplace.place import place
    result = place(gd, checkpoint=placer, cluster="post-2gpu", finetune=10, progress=False)
    assert result.summary.samples == 10 and result.step_time_s > 0
    assert set(result.placement) == {n.name for n in gd.node}
    assert all("/device:" in d for d in result.placement.values())


def test_memory_limit_that_nothing_fits_names_the_shortfall(checkpoint):
    from gplace.place import place
    with pytest.raises(GplaceError, match=r"no placement found fits in memory: .* MB on gpu\d, which holds 1.0 MB \(short by"):
        place(EXAMPLE, cluster="post-2gpu", checkpoint=checkpoint, memory_limit="1MB",
              progress=False)


def test_the_shortfall_names_the_closest_placement_of_all_tried(checkpoint):
    """With nothing fitting, the message names the placement short by the least (over the
    heuristics' and the policy's), and the searches not run yet."""
    from gplace.place import place
    from gplace.placers.base import cheap_heuristics
    from gplace.placers import SimMeasurer, get_placer
    from gplace.cluster import load_cluster, with_memory_limit
    from gplace.problem import PlacementProblem
    from gplace.sim import FastSimulator
    import gplace
    with pytest.raises(GplaceError) as e:
        place(EXAMPLE, cluster="post-2gpu", checkpoint=checkpoint, memory_limit="4MB",
              progress=False)
    message = str(e.value)
    problem = PlacementProblem.build(gplace.load_graph(EXAMPLE),
                                     with_memory_limit(load_cluster("post-2gpu"), "4MB"))
    short = {}
    for h in cheap_heuristics():
        p = get_placer(h).place(problem, SimMeasurer(problem), 0).placement
        short[h] = (FastSimulator(problem).run(p).peak_bytes - 4e6).max()
    named = message.split("the closest (")[1].split(")")[0]
    assert named == "gnn" or short[named] == min(short.values()), (message, short)
    assert message.endswith("; try --finetune 300 (finetune=300) or --optimal 60 (optimal=60)")


def test_optimal_runs_when_nothing_else_fits(checkpoint, monkeypatch):
    """place(optimal=...) asks the exact placer even when no other placement fits, and returns
    its placement when that one does (the solver stubbed: CP-SAT's time limit makes it
    machine-dependent)."""
    import gplace.place as place_module
    from gplace.placers.base import History, PlaceResult
    found = {}

    def solve(problem, seconds, seeds, workers=2):
        found["seeds"] = len(seeds)
        placement = np.zeros(problem.num_units, np.int64)
        return PlaceResult("optimal", placement, 0.5, True, 0, 0.0,
                           History(np.zeros(0), np.zeros(0, bool)),
                           {"status": "feasible", "returned": "solver"})
    monkeypatch.setattr(place_module, "_solve_exactly", solve)
    r = place_module.place(EXAMPLE, cluster="post-2gpu", checkpoint=checkpoint,
                           memory_limit="1MB", progress=False, optimal=5)
    assert r.summary.chosen == "optimal (CP-SAT)" and r.step_time_s == 0.5
    assert found["seeds"] == 1 + len(r.heuristics) and r.exact.info["status"] == "feasible"
    returned = "polish"  # the exact placer's hill climbing won, not the solver: said so

    def polished(problem, seconds, seeds, workers=2):
        result = solve(problem, seconds, seeds, workers)
        return result._replace(info={**result.info, "returned": returned})
    monkeypatch.setattr(place_module, "_solve_exactly", polished)
    r = place_module.place(EXAMPLE, cluster="post-2gpu", checkpoint=checkpoint,
                           memory_limit="1MB", progress=False, optimal=5)
    assert r.summary.chosen == "optimal (hill climbing after CP-SAT)"


def test_optimal_on_a_problem_over_the_solvers_size_is_refused_before_placing(monkeypatch):
    """The exact placer's size limit is checked first: no heuristic, zero-shot or fine-tuning
    runs (and is lost) before the refusal."""
    import gplace.place as place_module
    from gplace.graph import OpGraph
    chain = OpGraph.from_lists([1e9] * 12_000, [0] * 12_000,
                               [(k, k + 1) for k in range(11_999)], name="chain")
    monkeypatch.setattr(place_module, "cheap_heuristics", lambda: pytest.fail("placed first"))
    with pytest.raises(ConfigError, match=r"needs 60,000 \(op, device\) intervals, over its "
                                          r"50,000 \(12,000 ops on 5 devices\); place it "
                                          r"without --optimal"):
        place_module.place(chain, cluster="post-4gpu", progress=False, optimal=5)


def test_under_tight_memory_the_search_keeps_the_full_estimates_zero_shot_as_a_start(
        checkpoint, monkeypatch):
    """Where the full memory estimate refuses units devices, place() also tries it scaled to
    the peak (gplace.placers.heuristics_view.calibrated) and keeps every zero-shot as a start:
    what it returns fits and is never slower than the full estimate's zero-shot."""
    import gplace.place as place_module
    from gplace.sim import FastSimulator
    starts = {}
    real = place_module.calibrated

    def spy(problem):
        starts["problem"] = problem
        return real(problem)
    monkeypatch.setattr(place_module, "calibrated", spy)
    r = place_module.place(EXAMPLE, cluster="post-4gpu", checkpoint=checkpoint,
                           memory_limit="gpu0=40MB,gpu1=40MB,gpu2=40MB,gpu3=40MB",
                           progress=False)
    import gplace
    full = gplace.load(checkpoint).zero_shot(starts["problem"])
    sim = FastSimulator(r.problem)
    first = sim.run(full)
    assert not sim.run(r.unit_placement).oom
    assert first.oom or r.step_time_s <= first.step_time_s


def test_memory_limit_per_device_is_respected(checkpoint):
    from gplace.place import place
    r = place(EXAMPLE, cluster="post-2gpu", checkpoint=checkpoint, memory_limit="gpu0=1MB",
              progress=False)
    from gplace.sim import FastSimulator
    d = r.problem.cluster.device_index("gpu0")
    sim = FastSimulator(r.problem).run(r.unit_placement)
    assert r.problem.cluster.devices[d].memory_bytes == 1_000_000
    assert not sim.oom and sim.peak_bytes[d] <= 1_000_000


def test_cli_exports_everything(checkpoint, tmp_path):
    proc = subprocess.run(
        [sys.executable, "-m", "gplace", "place", str(EXAMPLE), "--cluster", "post-2gpu",
         "--checkpoint", str(checkpoint), "--finetune", "10", "--out", str(tmp_path), "--json"],
        capture_output=True, text=True, timeout=300)
    assert proc.returncode == 0, proc.stderr[-2000:]
    summary = json.loads(proc.stdout)
    assert summary["samples"] == 10
    for name in ("placed.pb", "placement.json", "trace.json", "report.html", "gantt.svg",
                 "devices.svg", "finetune.svg", "comparison.svg"):
        assert (tmp_path / name).stat().st_size > 0, name
    placement = json.loads((tmp_path / "placement.json").read_text())["placement"]
    import gplace
    placed = gplace.load_graph(tmp_path / "placed.pb")
    assert placed.devices.tolist() == [placement[n] for n in placed.names.tolist()]
    assert json.loads((tmp_path / "trace.json").read_text())["traceEvents"]


def test_placed_graph_runs_on_two_devices_with_the_same_loss(checkpoint, tmp_path, two_cpu_cluster):
    """The exported graph runs in TF on two logical CPU devices, gives the original's loss,
    and its ops ran where the placement put them."""
    from gplace.place import place
    from gplace.tfimport import tensorflow
    tf = tensorflow()
    with tf.Graph().as_default() as g:
        tf.compat.v1.set_random_seed(1)
        x = tf.constant(np.linspace(-1, 1, 64 * 32, dtype=np.float32).reshape(64, 32))
        h = x
        for i in range(3):
            w = tf.compat.v1.get_variable(f"w{i}", [32, 32],
                                          initializer=tf.compat.v1.constant_initializer(0.01 * (i + 1)))
            h = tf.nn.relu(tf.matmul(h, w))
        tf.reduce_mean(h, name="loss")
        tf.compat.v1.global_variables_initializer().__class__  # noqa: B018
        tf.group(*[v.initializer for v in tf.compat.v1.global_variables()], name="init")
    (tmp_path / "orig.pb").write_bytes(g.as_graph_def().SerializeToString())
    cluster = two_cpu_cluster
    r = place(tmp_path / "orig.pb", cluster=cluster, checkpoint=checkpoint, finetune=10,
              progress=False)
    # Force a split so that the check covers both devices.
    from dataclasses import replace
    r = replace(r, unit_placement=np.arange(r.problem.num_units) % 2)
    r.export(tmp_path / "out")
    (tmp_path / "placed.pb").write_bytes((tmp_path / "out" / "placed.pb").read_bytes())
    out = run_orig_and_placed(tmp_path, "loss:0", init="init")
    assert out["placed"]["loss"] == pytest.approx(out["orig"]["loss"], rel=1e-6)
    want = r.op_devices
    ran = out["placed"]["ran"]
    checked = [n for n in ran if n in want]
    assert len(checked) > 5
    for name in checked:
        assert ran[name].endswith(want[name].split("device:")[-1]), (name, ran[name], want[name])
    assert {want[n][-5:] for n in checked} == {"CPU:0", "CPU:1"}


def test_a_looped_graph_without_run_counts_says_its_loops_count_once(checkpoint, tmp_path):
    from gplace.place import place
    looped = Path(__file__).resolve().parents[1] / "datasets" / "corpus" / "rnn_loop_10.pb"
    with_runs = place(looped, cluster="post-2gpu", checkpoint=checkpoint, progress=False)
    assert "one iteration" not in with_runs.summary.costs  # its profile records the runs
    alone = tmp_path / "rnn_loop_10.pb"
    alone.write_bytes(looped.read_bytes())
    s = place(alone, cluster="post-2gpu", checkpoint=checkpoint, progress=False).summary
    assert s.costs.startswith("estimated (roofline) on cpu, gpu0, gpu1; ")
    assert "TF1 loops counted as one iteration" in s.costs
    assert EXAMPLE.is_file() and "loops" not in place(
        EXAMPLE, cluster="post-2gpu", checkpoint=checkpoint, progress=False).summary.costs


def test_polish_sets_zero_shots_estimate_replays(tmp_path):
    """``polish`` reaches zero-shot: 0 gives the unpolished placement of the shipped policy,
    the default its polished one, which the schedule estimates no slower; a negative count is
    one clear line from the command."""
    import dataclasses
    from gplace.gnn.config import FinetuneConfig
    from gplace.gnn.infer import ZeroShotPlacer
    from gplace.place import place
    plain, polished = (place(EXAMPLE, cluster="post-4gpu", polish=n, progress=False)
                       for n in (0, None))
    unpolished = dataclasses.replace(FinetuneConfig(), zero_shot_polish=0)
    expected = ZeroShotPlacer(0, config=unpolished).zero_shot(plain.problem)
    assert np.array_equal(plain.finetune.info["zero_shot_placement"], expected)
    assert not np.array_equal(polished.finetune.info["zero_shot_placement"], expected)
    run = subprocess.run([sys.executable, "-m", "gplace", "place", str(EXAMPLE), "--polish",
                          "-1", "--out", str(tmp_path / "o")], capture_output=True, text=True)
    assert run.returncode == 2 and "out of range" in run.stderr and "Traceback" not in run.stderr


def test_screen_sets_finetunings_moves_drawn_per_move_measured(tmp_path, monkeypatch):
    """``screen`` reaches the fine-tuning placer's config (the default where it is None); 0 is
    one clear line from the command, and out of range from the function."""
    from gplace.gnn import placer as placer_module
    from gplace.gnn.config import FinetuneConfig
    from gplace.place import place
    seen = []
    real_init = placer_module.GNNPlacer.__init__

    def spy(self, *args, **kwargs):
        real_init(self, *args, **kwargs)
        seen.append(self.config.local_screen)

    monkeypatch.setattr(placer_module.GNNPlacer, "__init__", spy)
    for screen in (1, None):
        place(EXAMPLE, cluster="post-4gpu", finetune=4, screen=screen, progress=False)
    assert seen == [1, FinetuneConfig().local_screen] and seen[1] > 1
    with pytest.raises(ConfigError, match="screen"):
        place(EXAMPLE, cluster="post-4gpu", finetune=4, screen=0, progress=False)
    run = subprocess.run([sys.executable, "-m", "gplace", "place", str(EXAMPLE), "--screen",
                          "0", "--out", str(tmp_path / "o")], capture_output=True, text=True)
    assert run.returncode == 2 and "out of range" in run.stderr and "Traceback" not in run.stderr


def test_a_cluster_of_one_device_is_refused():
    """Every placement on one device is the same one: nothing to search or measure again."""
    from gplace.place import place
    from tests.sim.helpers import cluster, device
    with pytest.raises(ConfigError, match="has one device, so every placement puts every op "
                                          "on it"):
        place(EXAMPLE, cluster=cluster(device("only")), progress=False)


def test_an_opgraph_from_a_file_is_priced_by_the_profile_beside_it(tmp_path):
    """place(gplace.load_graph(path)) costs what place(path) costs: the profile beside the
    file applies to the graph imported from it."""
    import shutil

    import gplace
    from gplace.place import place
    corpus = Path(__file__).resolve().parents[1] / "datasets" / "corpus"
    for suffix in (".pb", ".profile.json.gz"):
        shutil.copy(corpus / f"attn_stack_00{suffix}", tmp_path / f"attn_stack_00{suffix}")
    path = tmp_path / "attn_stack_00.pb"
    by_path = place(path, cluster="local-procs", progress=False, polish=0)
    by_graph = place(gplace.load_graph(path), cluster="local-procs", progress=False, polish=0)
    assert by_path.summary.costs == by_graph.summary.costs == "measured"
    assert by_graph.step_time_s == by_path.step_time_s


def test_a_loaded_placer_takes_the_calls_seed_and_settings(checkpoint):
    import gplace
    from gplace.place import place
    placer = gplace.load(checkpoint, seed=3)
    assert repr(placer) == f"GNNPlacer(seed=3, checkpoint={str(checkpoint)!r})"
    runs = {seed: place(EXAMPLE, cluster="post-4gpu", checkpoint=placer, finetune=10,
                        progress=False, polish=0, seed=seed) for seed in (None, 3, 5)}
    alone = place(EXAMPLE, cluster="post-4gpu", checkpoint=checkpoint, finetune=10,
                  progress=False, polish=0, seed=5)
    same = np.array_equal
    assert same(runs[None].unit_placement, runs[3].unit_placement)  # the placer's own seed
    assert same(runs[5].unit_placement, alone.unit_placement)       # the call's seed wins
    assert placer.seed == 3 and placer.config.zero_shot_polish != 0  # the placer is unchanged


def test_python_callers_get_pythons_errors_and_gplaces(checkpoint, tmp_path):
    import gplace
    from gplace.place import place
    graph = gplace.load_graph(EXAMPLE)
    with pytest.raises(TypeError, match="unexpected keyword argument 'finetnue'"):
        place(graph, finetnue=300)
    with pytest.raises(TypeError, match="unexpected keyword argument 'optimiser'"):
        gplace.load_graph(EXAMPLE, optimiser="adam")
    with pytest.raises(ConfigError, match="an OpGraph is imported already; signature"):
        place(graph, signature="train_step")
    for bad in (2.5, "10", True, None):
        with pytest.raises(ConfigError, match="finetune = .* must be a whole number"):
            place(graph, finetune=bad)
    with pytest.raises(ConfigError, match=r"seed = -1 must be a whole number in \[0, 4,294,967,295\]"):
        gplace.load(checkpoint, seed=-1)
    with pytest.raises(TypeError, match="takes a PlacementProblem .got OpGraph.; to place a "
                                        "graph or a model file: gplace.place.place"):
        gplace.load(checkpoint).place(graph)
    (tmp_path / "file").write_text("x")
    result = place(graph, cluster="post-2gpu", checkpoint=checkpoint, progress=False, polish=0)
    with pytest.raises(ConfigError, match="exists and is not a folder"):
        result.export(tmp_path / "file")
    graph.save(tmp_path / "g.npz")
    assert gplace.load_graph(tmp_path / "g.npz").num_ops == graph.num_ops


def test_a_cluster_given_from_python_gets_the_yaml_checks(checkpoint):
    import yaml

    from gplace.cluster import PRESET_DIR, load_cluster
    from gplace.place import place
    record = yaml.safe_load((PRESET_DIR / "post-2gpu.yaml").read_text())
    r = place(EXAMPLE, cluster=record, checkpoint=checkpoint, progress=False, polish=0)
    assert r.problem.cluster == load_cluster("post-2gpu")
    c = load_cluster("post-2gpu")
    bad = dataclasses.replace(c, devices=(c.devices[0], dataclasses.replace(
        c.devices[1], peak_flops=-1.0), c.devices[2]))
    with pytest.raises(ConfigError, match="field 'peak_flops' = -1.0 must be in"):
        place(EXAMPLE, cluster=bad, checkpoint=checkpoint, progress=False)


def test_a_result_prints_as_the_command_does(checkpoint):
    from gplace.place import place
    r = place(EXAMPLE, cluster="post-2gpu", checkpoint=checkpoint, progress=False, polish=0)
    assert repr(r).startswith("PlacementResult('small_resnet' on post-2gpu: ")
    assert len(repr(r)) < 200
    lines = str(r).splitlines()
    assert lines[0].startswith("small_resnet: 699 ops") and lines[1].startswith("step time")
    assert not any(line.startswith("wrote") for line in lines)


def test_placing_leaves_the_callers_torch_random_state_and_threads(checkpoint):
    from gplace.place import place
    threads = torch.get_num_threads()
    torch.manual_seed(123)
    expected = torch.rand(3)
    torch.manual_seed(123)
    place(EXAMPLE, cluster="post-2gpu", checkpoint=checkpoint, finetune=10, progress=False,
          polish=0)
    assert torch.equal(torch.rand(3), expected)
    assert torch.get_num_threads() == threads


def test_a_saved_opgraph_is_priced_by_its_own_profile_else_its_sources(tmp_path):
    import shutil

    import gplace
    from gplace.place import place
    corpus = Path(__file__).resolve().parents[1] / "datasets" / "corpus"
    for suffix in (".pb", ".profile.json.gz"):
        shutil.copy(corpus / f"attn_stack_00{suffix}", tmp_path / f"attn_stack_00{suffix}")
    graph = gplace.load_graph(tmp_path / "attn_stack_00.pb")
    graph.save(tmp_path / "saved.npz")
    kw = dict(cluster="local-procs", progress=False, polish=0)
    by_path = place(tmp_path / "saved.npz", **kw)
    by_graph = place(gplace.load_graph(tmp_path / "saved.npz", name="renamed"), **kw)
    assert by_path.summary.costs == by_graph.summary.costs == "measured"
    assert by_graph.summary.graph == "renamed"
    synthetic = place(OpGraph_from_lists(), **kw)  # no file behind it: estimates
    assert synthetic.summary.costs.startswith("estimated")


def OpGraph_from_lists():
    from gplace.graph import OpGraph
    return OpGraph.from_lists([1e6] * 4, [1000] * 4, [(0, 1), (1, 2), (2, 3)])


def test_a_policy_or_a_placers_subclass_is_a_checkpoint_and_nothing_else_is(checkpoint):
    import gplace
    from gplace.gnn.placer import GNNPlacer
    from gplace.place import place

    class Mine(GNNPlacer):
        pass

    placer = gplace.load(checkpoint)
    mine = Mine(seed=1, policy=placer.policy)
    a = place(EXAMPLE, cluster="post-2gpu", checkpoint=mine, finetune=5, progress=False,
              polish=0)
    b = place(EXAMPLE, cluster="post-2gpu", checkpoint=placer.policy, finetune=5, seed=1,
              progress=False, polish=0)
    assert np.array_equal(a.unit_placement, b.unit_placement)
    with pytest.raises(ConfigError, match="checkpoint: a policy file, a gplace.load placer"):
        place(EXAMPLE, checkpoint=3.5, finetune=5)


def test_a_cluster_of_numpy_figures_is_a_cluster():
    from gplace.cluster import load_cluster
    from gplace.place import choose_cluster
    c = load_cluster("post-2gpu")
    arrays = dataclasses.replace(c, devices=tuple(dataclasses.replace(
        d, memory_bytes=np.int64(d.memory_bytes), peak_flops=np.float32(d.peak_flops))
        for d in c.devices))
    assert choose_cluster(arrays)[0] is arrays


def test_real_measurement_defaults_to_this_machines_processes_where_tf_sees_one_device():
    from gplace.cluster import tf_sees_one_device
    from gplace.place import choose_cluster
    if not tf_sees_one_device():
        pytest.skip("TensorFlow may see several devices here: the default is theirs")
    assert choose_cluster(None)[0].name == "post-4gpu"
    chosen, why = choose_cluster(None, "real")
    assert chosen.name == "local-procs" and "--measure real runs here" in why


def test_gplace_place_is_the_place_function_and_the_module():
    import importlib
    import gplace
    module = importlib.import_module("gplace.place")
    assert gplace.place is module and callable(gplace.place)
    r = gplace.place(EXAMPLE, cluster="post-2gpu", progress=False, polish=0)
    assert r.step_time_s == module.place(EXAMPLE, cluster="post-2gpu", progress=False,
                                         polish=0).step_time_s
    with pytest.raises(AttributeError, match="no attribute 'plcae'"):
        gplace.plcae


def test_a_torch_module_gets_the_export_recipe():
    import gplace
    from gplace.errors import GraphError

    class MyNet(torch.nn.Module):
        pass

    with pytest.raises(GraphError, match=r"cannot import a PyTorch MyNet object; pass "
                                         r"torch.export.export\(module, batch\)"):
        gplace.load_graph(MyNet())


def test_progress_bars_count_what_they_say_and_fine_tuning_guesses_no_time_left(capsys):
    from gplace.place import _SamplesBar, _ZeroShotBar
    zero = _ZeroShotBar()
    zero.update_to("rollout batches", 1, 4)
    zero.close()
    samples = _SamplesBar(10)
    samples.update_to(3, 0.012)
    samples.bar.refresh()  # within tqdm's minimum interval it would not redraw
    samples.close()
    err = capsys.readouterr().err
    assert "zero-shot rollout batches" in err and "batch/s" in err
    tuning = err[err.index("fine-tuning"):]
    assert "3/10" in tuning and "best 12.000 ms" in tuning and "<" not in tuning  # no ETA


def test_the_command_draws_no_bars_into_a_log(tmp_path):
    import subprocess
    import sys
    from pathlib import Path
    example = Path(__file__).resolve().parents[1] / "gplace" / "examples" / "small_resnet.pb"
    done = subprocess.run([sys.executable, "-m", "gplace", "place", str(example), "--finetune",
                           "20", "--out", str(tmp_path / "out")], capture_output=True, text=True,
                          timeout=300)
    assert done.returncode == 0, done.stderr
    assert "%|" not in done.stderr and "\r" not in done.stderr
