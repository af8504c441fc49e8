"""report.html and the export folder: the sections a person reads, figures that are in the
folder and shown on the page, and per-device and per-scope figures checked by hand."""

import re
from pathlib import Path
from dataclasses import replace
from xml.etree import ElementTree

import numpy as np
import pytest

from gplace.graph import OpGraph
from gplace.place import PlacementResult
from gplace.placers.base import History, PlaceResult
from gplace.report import export_all, placement_record
from gplace.report_page import device_rows, fetch_ops, report_html, scope_rows
from gplace.sim import FastSimulator
from gplace.summary import BestHeuristic, PlaceSummary

from tests.sim.helpers import cluster, device, problem

MS = 1e-3
PLACEMENT = np.array([0, 0, 1, 1, 1])  # a/x, a/y on d0; b/z, loss, init on d1


def _run(name: str, step: float, samples: int = 0) -> PlaceResult:
    return PlaceResult(name, PLACEMENT, step, True, samples, 0.0,
                       History(np.full(samples, step), np.ones(samples, bool)), {})


@pytest.fixture(scope="module")
def result() -> PlacementResult:
    # a/x -> a/y -> b/z -> loss, and a lone "init"; times 1, 2, 2.5, 1, 0.5 ms on any device.
    g = OpGraph.from_lists([0] * 5, [0] * 5, [(0, 1), (1, 2), (2, 3)],
                           names=["a/x", "a/y", "b/z", "loss", "init"],
                           param_bytes=[100, 0, 200, 0, 0], name="tiny")
    prob = problem(g, cluster(device("d0", memory=1000), device("d1", memory=400)),
                   np.array([1.0, 2.0, 2.5, 1.0, 0.5]) * MS)
    summary = PlaceSummary(
        graph="tiny", ops=5, units=5, cluster="test", cluster_choice="cluster test (given)",
        devices=("d0", "d1"), step_time_s=5 * MS, single_device_s=7.5 * MS,
        best_heuristic=BestHeuristic("heft", 6 * MS), lower_bound_s=4 * MS,
        zero_shot_step_time_s=5.5 * MS, samples=3, wall_s=1.25, measure="sim",
        costs="measured", step_times="simulated, an estimate", groups=5,
        chosen="gnn (fine-tuned)")
    heuristics = {"single": _run("single", 7.5 * MS), "heft": _run("heft", 6 * MS)}
    return PlacementResult(g, prob, PLACEMENT, 5 * MS, summary, _run("gnn", 5 * MS, 3),
                           heuristics, g, start_step_time_s=5.5 * MS)


@pytest.fixture(scope="module")
def sim(result):
    return FastSimulator(result.problem).run(result.unit_placement)


@pytest.fixture(scope="module")
def page(result, sim) -> str:
    return report_html(result, sim, ["gantt.svg", "devices.svg"])


def test_device_rows_count_ops_busy_time_and_memory(result, sim):
    rows = device_rows(result.problem, sim)
    assert [r.name for r in rows] == ["d0", "d1"]
    assert [r.ops for r in rows] == [2, 3]
    assert [r.busy_s for r in rows] == pytest.approx([3 * MS, 4 * MS])
    assert sim.step_time_s == pytest.approx(6.5 * MS)  # a/x, a/y, b/z, loss in a row
    assert [r.busy_share for r in rows] == pytest.approx([3 / 6.5, 4 / 6.5])
    assert [r.peak_bytes for r in rows] == [100, 200]
    assert [r.capacity_bytes for r in rows] == [1000, 400]


def test_scope_rows_by_busy_time_with_the_rest_folded(result, sim):
    rows = scope_rows(result.graph, sim, 2, top=2)
    assert [r.scope for r in rows] == ["a", "b", "(2 other scopes)"]
    assert [r.ops for r in rows] == [2, 1, 2]
    assert [r.busy_s for r in rows] == pytest.approx([3 * MS, 2.5 * MS, 1.5 * MS])
    np.testing.assert_allclose(np.stack([r.share for r in rows]), [[1, 0], [0, 1], [0, 1]])


def test_fetch_ops_are_the_training_ops_the_initializer_and_the_feeds():
    """What report.html's snippet runs: ``init`` once (left out of the step at import),
    then the ops that update the variables, fed by the placeholders."""
    import gplace
    from gplace.tfimport import tensorflow
    tf = tensorflow()
    v1 = tf.compat.v1
    graph = tf.Graph()
    with graph.as_default():
        x = v1.placeholder(tf.float32, [4, 3], name="x")
        w = v1.get_variable("w", [3, 2], use_resource=True)
        loss = tf.reduce_mean(tf.square(tf.matmul(x, w)), name="loss")
        v1.train.GradientDescentOptimizer(0.1).minimize(loss, name="train_op")
        v1.global_variables_initializer()
    g = gplace.load_graph(graph.as_graph_def())
    assert fetch_ops(g) == (["init"], ["train_op"], ["x"], 0)


def test_headline_states_the_result_and_who_found_it(page):
    h1 = re.search(r"<h1>(.*?)</h1>", page).group(1)
    assert h1 == "tiny on test: 5.000 ms per training step"
    lead = re.search(r"<p class='lead'>(.*?)</p>", page).group(1)
    assert "1.50x as fast as the single fastest device (7.500 ms)" in lead
    assert "1.20x as fast as the best heuristic, heft (6.000 ms)" in lead
    assert "Found by <b>gnn (fine-tuned)</b>, with 3 fine-tuning samples" in lead
    assert "No placement can beat the lower bound of 4.000 ms" in page


def test_page_has_every_section_in_order(page):
    assert re.findall(r"<h2>(.*?)</h2>", page) == [
        "Placers compared", "Devices", "Where the name scopes went", "Figures",
        "Running placed.pb"]


def _table_after(page: str, heading: str) -> list[list[str]]:
    """The body rows of the first table after ``<h2>heading</h2>``, as cell texts."""
    table = page.split(f"<h2>{heading}</h2>", 1)[1].split("<tbody>", 1)[1].split("</tbody>")[0]
    return [[re.sub(r"<[^>]+>", "", c).strip() for c in re.findall(r"<td[^>]*>(.*?)</td>", tr)]
            for tr in re.findall(r"<tr[^>]*>(.*?)</tr>", table)]


def test_comparison_table_ranks_every_placer_and_marks_the_chosen_one(page):
    rows = _table_after(page, "Placers compared")
    assert [(r[0], r[1]) for r in rows] == [
        ("gnn (fine-tuned) (chosen)", "5.000 ms"), ("gnn (zero-shot)", "5.500 ms"),
        ("heft", "6.000 ms"), ("single", "7.500 ms"), ("lower bound", "4.000 ms")]
    assert rows[0][2] == "1.00x the time" and rows[2][2] == "1.20x the time"
    assert page.count("class=chosen") == 1


def test_device_and_scope_tables(page):
    devices = _table_after(page, "Devices")
    assert [r[:3] for r in devices] == [["d0", "test", "2"], ["d1", "test", "3"]]
    assert devices[1][7] == "50.0%"  # 200 B of 400 B
    scopes = _table_after(page, "Where the name scopes went")
    assert [r[0] for r in scopes] == ["a", "b", "loss", "init"]
    assert scopes[0][3:] == ["100%", ""]


def test_no_script_and_no_json_in_cells(page):
    assert "<script" not in page.lower()
    for cell in re.findall(r"<td[^>]*>(.*?)</td>", page):
        assert not re.search(r"[{}\[\]]", cell), cell


def test_how_to_run_names_the_devices_and_the_fetches(page):
    run = page.split("<h2>Running placed.pb</h2>", 1)[1]
    assert "<code>/device:X:d0</code>" in run and "<code>/device:X:d1</code>" in run
    # a made-up graph: no update op, so every sink is fetched; no initializer left out
    assert "sess.run([&#x27;loss&#x27;, &#x27;init&#x27;])" in run
    assert "run your variables&#x27; initializer once" in run
    assert "allow_soft_placement=False" in run


def test_measured_step_times_say_what_is_simulated(result, sim):
    real = replace(result, summary=replace(result.summary, measure="real",
                                           step_times="measured on hardware"))
    page = report_html(real, sim, [])
    assert "these per-device figures are the cost model's" in page
    assert "bounds simulated step times, not measured ones" in page
    assert "No placement can beat" not in page


def test_the_fine_tuned_row_shows_the_time_measured_beside_the_heuristics(result):
    from gplace.report_page import placer_rows
    rows = {r.placer: r.step_time_s for r in placer_rows(result)}
    assert rows["gnn (fine-tuned)"] == 5 * MS  # the search's own figure
    real = replace(result, intervals={"gnn": (5.4 * MS, 5.2 * MS, 5.6 * MS)})
    rows = {r.placer: r.step_time_s for r in placer_rows(real)}
    assert rows["gnn (fine-tuned)"] == 5.4 * MS  # the head-to-head's, not fine-tuning's


def test_placement_record_leaves_out_the_wall_time(result):
    record = placement_record(result)
    assert "wall_s" not in record["summary"]
    assert "intervals_s" not in record  # simulated: no intervals
    real = replace(result, intervals={"chosen": (5.0, 4.9, 5.1), "gnn": (5.0, 4.9, 5.1)},
                   ties=("heft",))
    assert placement_record(real)["intervals_s"]["chosen"] == [5.0, 4.9, 5.1]
    assert placement_record(real)["ties"] == ["heft"]
    assert record["summary"]["best_heuristic"] == {"name": "heft", "step_time_s": 6 * MS}
    assert record["placement"]["b/z"] == "/device:X:d1"


def test_export_folder_holds_the_page_and_every_figure_it_shows(result, tmp_path):
    files = export_all(result, tmp_path)
    names = {f.name for f in files}
    assert "placed.pb" not in names  # an OpGraph source has no TF graph to export
    page = (tmp_path / "report.html").read_text()
    shown = re.findall(r"<img src='([^']+)'", page)
    svgs = sorted(f.name for f in tmp_path.iterdir() if f.suffix == ".svg")
    assert sorted(shown) == svgs == ["comparison.svg", "devices.svg", "finetune.svg",
                                     "gantt.svg"]
    for name in shown:  # well-formed SVG documents
        root = ElementTree.fromstring((tmp_path / name).read_text())
        assert root.tag == "{http://www.w3.org/2000/svg}svg"
    assert "No <code>placed.pb</code>" in page
    assert sorted(f.name for f in tmp_path.iterdir()) == sorted(names)  # nothing else left


def test_an_opgraph_imported_from_a_file_exports_its_placed_pb(tmp_path):
    """The README's Python path: place(gplace.load_graph(path)).export(dir) writes placed.pb
    from the file the OpGraph came from; an OpGraph whose file is gone writes none."""
    import shutil
    import gplace
    from gplace.place import place
    from gplace.tfimport import tensorflow
    path = tmp_path / "model.pb"
    shutil.copy(Path(__file__).resolve().parents[1] / "gplace" / "examples" / "small_resnet.pb",
                path)
    graph = gplace.load_graph(str(path))
    result = place(graph, cluster="post-2gpu", polish=0)
    result.export(tmp_path / "out")
    placed = tensorflow().compat.v1.GraphDef()
    placed.ParseFromString((tmp_path / "out" / "placed.pb").read_bytes())
    assert {n.name: n.device for n in placed.node} == result.op_devices
    path.unlink()
    result.export(tmp_path / "again")
    assert not (tmp_path / "again" / "placed.pb").exists()


def _recipe(folder: Path) -> str:
    """The code report.html gives for running placed.pb."""
    import html
    page = (folder / "report.html").read_text()
    return html.unescape(page.split("<h2>Running placed.pb</h2>", 1)[1]
                         .split("<pre>", 1)[1].split("</pre>", 1)[0])


def _tf2_step():
    """A tf.function that trains two variables, in this process; (its variables, itself)."""
    from gplace.tfimport import tensorflow
    tf = tensorflow()
    w, v = tf.Variable(tf.ones([4, 4])), tf.Variable(tf.zeros([4]))

    @tf.function(input_signature=[tf.TensorSpec([2, 4], tf.float32)])
    def step(x):
        with tf.GradientTape() as tape:
            loss = tf.reduce_sum(tf.nn.relu(tf.matmul(x, w) + v) ** 2)
        gw, gv = tape.gradient(loss, [w, v])
        w.assign_sub(0.01 * gw)
        v.assign_sub(0.01 * gv)
        return {"loss": loss}
    return (w, v), step


def test_the_recipe_of_a_functions_placed_graph_runs_its_steps(tmp_path, monkeypatch):
    """placed.pb of a tf.function reads its variables through placeholders: the recipe maps
    them to the variables, in the process that traced it, and two steps give eager's losses."""
    from gplace.place import place
    from gplace.tfimport import tensorflow
    tf = tensorflow()
    (w, v), step = _tf2_step()
    place(step.get_concrete_function(), cluster="post-2gpu", polish=0,
          progress=False).export(tmp_path)
    x = tf.constant(np.arange(8, dtype=np.float32).reshape(2, 4) / 10)
    eager = [float(step(x)["loss"]) for _ in range(2)]
    w.assign(tf.ones([4, 4]))
    v.assign(tf.zeros([4]))
    code = _recipe(tmp_path)
    assert "wrap_function" in code and "sess.run" not in code
    monkeypatch.chdir(tmp_path)
    scope = {"step": step, "batch": (x,)}
    exec(code.replace("get_concrete_function(...)", "get_concrete_function()"), scope)
    again = [float(scope["placed_step"](x)[0]) for _ in range(1)]  # the recipe ran one
    assert again == eager[1:]


def test_the_recipe_of_a_saved_models_placed_graph_restores_and_runs_its_signature(
        tmp_path, monkeypatch):
    from gplace.place import place
    from gplace.tfimport import tensorflow
    tf = tensorflow()
    (w, v), step = _tf2_step()
    module = tf.Module()
    module.w, module.v = w, v
    tf.saved_model.save(module, str(tmp_path / "sm"), signatures={"train": step})
    x = np.arange(8, dtype=np.float32).reshape(2, 4) / 10
    eager = float(step(x)["loss"])
    result = place(str(tmp_path / "sm"), cluster="post-2gpu", polish=0, progress=False)
    result.export(tmp_path / "out")
    code = _recipe(tmp_path / "out")
    assert "variables/variables" in code and "signature 'train' (inputs x)" in code
    monkeypatch.chdir(tmp_path / "out")
    code = code.replace("allow_soft_placement=False", "allow_soft_placement=True")  # no GPU
    code = code.replace("    sess.run({'loss'", "    out = sess.run({'loss'").replace("...", "x")
    scope = {"x": x}
    exec(code, scope)
    assert float(scope["out"]["loss"]) == eager  # the saved variables, one step
