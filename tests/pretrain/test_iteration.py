"""`gplace pretrain` runs expert iteration: rounds, resumption, parallel searches, hostile
corpora."""

from __future__ import annotations

import io
import json
import os
import select
import shutil
import signal
import subprocess
import sys
import time
from dataclasses import replace
from pathlib import Path

import numpy as np
import pytest

from gplace.gnn.config import LearnConfig, PretrainConfig

ROOT = Path(__file__).resolve().parents[2]
GRAPHS = [ROOT / "gplace" / "examples" / "small_resnet.pb",
          ROOT / "datasets" / "corpus" / "mlp_3x1024_b256.pb"]
TINY = ["--clusters", "post-2gpu", "--random-clusters", "1", "--expert-budget", "4",
        "--max-steps", "2", "--val-every", "1", "--problems-per-step", "1",
        "--hidden-channels", "8", "--num-layers", "1", "--no-progress"]


def gplace(argv, cwd, timeout=600):
    return subprocess.run([sys.executable, "-m", "gplace", "pretrain", *argv], cwd=cwd,
                          capture_output=True, text=True, timeout=timeout,
                          env={**os.environ, "PYTHONPATH": str(ROOT),
                               "PYTHONWARNINGS": "ignore"})


def folder_corpus(path: Path, junk: bool = False) -> Path:
    path.mkdir()
    for g in GRAPHS:
        shutil.copy(g, path / g.name)
    if junk:
        (path / "junk.pb").write_bytes(os.urandom(3000))
    return path


def test_the_command_runs_a_round_and_skips_a_junk_graph(tmp_path):
    """Two TensorFlow graphs and a PyTorch program (its step with Adam) train a round."""
    from gplace.examples.torch.build import export_example
    corpus = folder_corpus(tmp_path / "mine", junk=True)
    export_example("gnn", corpus)
    proc = gplace(["--corpus", str(corpus), "--rounds", "1", "--out", "out/p.pt",
                   "--optimizer", "adam", *TINY], tmp_path)
    assert proc.returncode == 0, proc.stderr[-3000:]
    err = proc.stderr
    skips = [l for l in err.splitlines() if l.startswith("pretrain: skipped")]
    assert len(skips) == 1 and skips[0].startswith("pretrain: skipped junk.pb: ")
    corpus_lines = [l for l in err.splitlines() if l.startswith("pretrain: corpus ")]
    assert ": 3 graphs (3 train)" in corpus_lines[0] and corpus_lines[0].endswith("(1 left out)")
    assert all(": 3 graphs (3 train)" in line for line in corpus_lines)  # the pools' too
    assert "round 1 step 2/2: validation" in err and "round 1 done: validation" in err
    card = (tmp_path / "out" / "p.md").read_text()
    assert card.splitlines()[0].endswith(" --optimizer adam`")
    assert "| **1** |" in card and "| 2 |" in card  # the round row, the step-2 validation row
    assert f"written on a machine with {os.cpu_count()} CPU cores" in card
    import gplace as gp
    assert gp.load(tmp_path / "out" / "p.pt").meta["round"] == 1


@pytest.mark.parametrize("manifest, needle", [
    ("graphs: [\n", "not valid YAML at line"),
    ("graphs:\n- {name: a, family: a, split: train}\n", "graph row 1 (a) has no 'graph:'"),
])
def test_a_broken_manifest_is_one_line_and_leaves_nothing(tmp_path, manifest, needle):
    corpus = folder_corpus(tmp_path / "mine")
    (corpus / "manifest.yaml").write_text(manifest)
    proc = gplace(["--corpus", str(corpus), "--out", "out/p.pt"], tmp_path, timeout=120)
    lines = proc.stderr.strip().splitlines()
    assert proc.returncode == 2 and len(lines) == 1, proc.stderr
    assert lines[0].startswith("gplace pretrain: error: ") and needle in lines[0], lines[0]
    assert not (tmp_path / "out").exists()


def tiny(corpus, **kw) -> PretrainConfig:
    return PretrainConfig(**{**dict(corpus=str(corpus), clusters=("post-2gpu",),
                                    random_clusters=1, max_steps=4, val_every=2,
                                    problems_per_step=1, hidden_channels=8, num_layers=1,
                                    expert_budget=4), **kw})


@pytest.mark.slow
def test_a_finished_round_is_not_redone_and_a_killed_one_resumes(tmp_path):
    from gplace.gnn.iteration import run_iteration
    from gplace.gnn.policy import GNNPolicy
    corpus = folder_corpus(tmp_path / "mine")
    cfg = tiny(corpus, rounds=1)
    run_iteration(cfg, tmp_path / "a.pt", tmp_path / "run")
    first = GNNPolicy.load(tmp_path / "a.pt")[0].state_dict()
    log = tmp_path / "log.txt"
    with log.open("w") as f:  # finished: nothing is trained again
        run_iteration(cfg, tmp_path / "b.pt", tmp_path / "run", log=f)
    assert "round 1 step" not in log.read_text() and "round 1 done" in log.read_text()
    # killed after its last checkpoint: the imitation resumes and ends where it would have
    (tmp_path / "run" / "round1" / "result.json").unlink()
    (tmp_path / "run" / "round1" / "policy.pt").unlink()
    with log.open("w") as f:
        run_iteration(cfg, tmp_path / "c.pt", tmp_path / "run", log=f)
    assert "round 1: resuming the imitation at step 4/4 from " in log.read_text()
    again = GNNPolicy.load(tmp_path / "c.pt")[0].state_dict()
    assert all(np.array_equal(first[k], again[k]) for k in first)
    # more rounds continue the same run folder; another config is refused
    results = run_iteration(replace(cfg, rounds=2), tmp_path / "d.pt", tmp_path / "run")
    assert [r.round for r in results] == [1, 2] and results[1].searched == 4
    assert results[1].start.endswith("round1/policy.pt")
    from gplace.errors import ConfigError
    with pytest.raises(ConfigError, match="holds a run of another configuration"):
        run_iteration(replace(cfg, max_steps=5), tmp_path / "e.pt", tmp_path / "run")


SEARCH = """
import sys
from gplace.gnn.config import PretrainConfig
from gplace.gnn.iteration import search_experts
rank, world, jobs = map(int, sys.argv[2:5])
cfg = PretrainConfig(corpus=sys.argv[1], clusters=("post-2gpu",), random_clusters=1,
                     hidden_channels=8, num_layers=1, expert_budget=6)
search_experts(cfg, 1, rank, world, jobs)
"""


def experts_of(corpus: Path) -> dict[str, bytes]:
    return {f.name: f.read_bytes() for f in (corpus / ".gplace-cache" / "experts").glob("*.npy")}


@pytest.mark.slow
def test_two_ranks_find_the_experts_one_finds(tmp_path):
    """Ranks 0 and 1 of 2 (two processes at once, meeting in one cache folder) and 2 local
    jobs write byte for byte the experts one process writes."""
    runs = {}
    for name, shares in (("one", [(0, 1, 1)]), ("ranks", [(0, 2, 1), (1, 2, 1)]),
                         ("jobs", [(0, 1, 2)])):
        corpus = folder_corpus(tmp_path / name)
        procs = [subprocess.Popen([sys.executable, "-c", SEARCH, str(corpus), *map(str, s)],
                                  env={**os.environ, "PYTHONPATH": str(ROOT)}, cwd=tmp_path,
                                  stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
                 for s in shares]
        for p in procs:
            assert p.wait(timeout=600) == 0, p.stderr.read()[-2000:]
        runs[name] = experts_of(corpus)
    assert len(runs["one"]) == 4
    assert runs["ranks"] == runs["one"] == runs["jobs"]


def test_the_searches_default_to_the_cores_within_memory(monkeypatch):
    """One search process per core, shared by the node's ranks, at most one per JOB_MEMORY."""
    from gplace.gnn import iteration
    monkeypatch.setattr(os, "sched_getaffinity", lambda pid: set(range(8)))
    pages = {"SC_PAGE_SIZE": 4096, "SC_PHYS_PAGES": 64 * (1 << 30) // 4096}
    monkeypatch.setattr(os, "sysconf", lambda name: pages[name])
    assert iteration.default_jobs() == 8          # 64 GiB hold 16 searches
    assert iteration.default_jobs(2) == 4         # two ranks share the 8 cores
    assert iteration.default_jobs(16) == 1        # never none
    pages["SC_PHYS_PAGES"] = 12 * (1 << 30) // 4096
    assert iteration.default_jobs() == 12 // (iteration.JOB_MEMORY >> 30)


def test_a_run_folder_from_before_validate_resumes_only_with_greedy(tmp_path):
    """A config.json without ``validate`` is a run that validated the greedy rollout."""
    from gplace.errors import ConfigError
    from gplace.gnn.iteration import check_run_folder
    cfg = PretrainConfig(corpus=str(tmp_path))
    check_run_folder(cfg, tmp_path)                          # writes the folder's config
    written = json.loads((tmp_path / "config.json").read_text())
    assert written["validate"] == "zero-shot"
    check_run_folder(cfg, tmp_path)                          # the same run: resumes
    old = {k: v for k, v in written.items()
           if k not in ("validate", "type_channels", "unknown_dim", "optimizer", "trust_pt2")}
    (tmp_path / "config.json").write_text(json.dumps(old, indent=1, sort_keys=True))
    with pytest.raises(ConfigError, match="--validate greedy"):
        check_run_folder(cfg, tmp_path)
    check_run_folder(replace(cfg, validate="greedy"), tmp_path)
    with pytest.raises(ConfigError, match="another configuration"):
        check_run_folder(replace(cfg, validate="greedy", seed=1), tmp_path)
    with pytest.raises(ConfigError, match="another configuration"):  # before: 16 channels
        check_run_folder(replace(cfg, validate="greedy", type_channels=0), tmp_path)
    # before --unknown-dim and --optimizer: batch 1 and SGD
    with pytest.raises(ConfigError, match="another configuration"):
        check_run_folder(replace(cfg, validate="greedy", unknown_dim=64), tmp_path)
    with pytest.raises(ConfigError, match="another configuration"):
        check_run_folder(replace(cfg, validate="greedy", optimizer="adam"), tmp_path)
    assert "unknown_dim" not in old and "optimizer" not in old


def test_a_round_without_experts_says_so_in_the_log_and_the_card():
    from gplace.gnn.card import _experts_figure
    from gplace.gnn.iteration import RoundResult
    r = RoundResult(1, None, 0, float("nan"), 0.7, "the last step", 1.0, "policy.pt")
    assert (r.experts_text(), _experts_figure(r)) == ("no experts", "none")
    r = r._replace(experts_vs_heuristic=0.8)
    assert (r.experts_text(), _experts_figure(r)) == ("experts 0.8000x the best heuristic",
                                                      "0.8000")


def test_init_takes_the_checkpoints_network_shape_op_types_included(tmp_path):
    from gplace.cli.pretrain_cmd import _network_shape
    from gplace.errors import ConfigError
    from gplace.gnn.policy import GNNPolicy
    GNNPolicy(hidden_channels=8, num_layers=1, type_channels=0).save(tmp_path / "p.pt")
    cfg = _network_shape(PretrainConfig(init_from=str(tmp_path / "p.pt")))
    assert (cfg.hidden_channels, cfg.num_layers, cfg.type_channels) == (8, 1, 0)
    with pytest.raises(ConfigError, match="0 op-type channels"):
        _network_shape(PretrainConfig(init_from=str(tmp_path / "p.pt"), type_channels=4))


def test_a_run_folder_resumes_only_on_the_costs_it_started_with(tmp_path):
    """A graph that gains a profile (gplace profile) after a run started gives other problems:
    resuming that run folder is refused, with one line naming the graph."""
    from gplace.errors import ConfigError
    from gplace.gnn.iteration import check_run_folder
    corpus, run = tmp_path / "mine", tmp_path / "run"
    corpus.mkdir()
    run.mkdir()
    example = Path(__file__).resolve().parents[2] / "gplace" / "examples" / "small_resnet.pb"
    (corpus / "a.pb").write_bytes(example.read_bytes())
    cfg = PretrainConfig(corpus=str(corpus))
    check_run_folder(cfg, run)
    check_run_folder(cfg, run)                               # nothing changed: resumes
    (corpus / "a.profile.json.gz").write_bytes(b"a profile")
    with pytest.raises(ConfigError, match="a changed since"):
        check_run_folder(cfg, run)
    (corpus / "a.profile.json.gz").unlink()
    check_run_folder(cfg, run)                               # as it started: resumes
    (corpus / "b.pb").write_bytes(example.read_bytes())      # a graph added
    with pytest.raises(ConfigError, match="of b changed since"):
        check_run_folder(cfg, run)
    (corpus / "b.pb").unlink()
    (corpus / "a.pb").write_bytes(example.read_bytes()[:-1] + b"\0\0")  # a graph replaced
    with pytest.raises(ConfigError, match="of a changed since"):
        check_run_folder(cfg, run)


@pytest.mark.slow
def test_a_run_from_init_hands_back_the_start_where_no_round_beats_it(tmp_path):
    """--init: the starting policy is validated as round 0 (once, kept in the run folder); the
    command writes it unchanged where it validates best, else the best round."""
    from gplace.gnn.iteration import START, run_iteration
    from gplace.gnn.policy import GNNPolicy
    corpus = folder_corpus(tmp_path / "mine")
    GNNPolicy(hidden_channels=8, num_layers=1).save(tmp_path / "start.pt")
    cfg = tiny(corpus, rounds=1, init_from=str(tmp_path / "start.pt"))
    results = run_iteration(cfg, tmp_path / "a.pt", tmp_path / "run")
    start = json.loads((tmp_path / "run" / START).read_text())
    assert start["round"] == 0 and 0 < start["val"] < np.inf
    best = min([start["val"]] + [r.val for r in results])
    wrote = (tmp_path / "a.pt").read_bytes()
    assert (wrote == (tmp_path / "start.pt").read_bytes()) == (best == start["val"])
    card = (tmp_path / "a.md").read_text()
    assert "| none: the starting policy (--init) | 0 | none |" in card
    assert card.splitlines()[0].endswith(f"--init {tmp_path / 'start.pt'}`")
    assert "ranks:" not in card  # one process
    for val, handed_back in ((0.0, True), (np.inf, False)):  # the start made best, then worst
        (tmp_path / "run" / START).write_text(json.dumps({**start, "val": val}))
        run_iteration(cfg, tmp_path / "b.pt", tmp_path / "run")
        same = (tmp_path / "b.pt").read_bytes() == (tmp_path / "start.pt").read_bytes()
        card = (tmp_path / "b.md").read_text()
        assert same == handed_back
        assert ("No round validated better than the starting policy" in card) == handed_back
        assert card.startswith("# Policy card: `gplace pretrain --corpus")
        assert ("Written: the starting policy" if handed_back
                else "Written: the policy of the row in bold below") in card


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="PR_SET_PDEATHSIG is Linux's")
def test_search_processes_die_with_a_run_killed_without_clean_up(tmp_path):
    """A run killed by SIGKILL (as by the OOM killer; SIGTERM skips clean-up too) leaves no
    search process behind: without the pool's parent-death signal the worker would wait on its
    task queue, holding its memory, for ever."""
    script = tmp_path / "run.py"
    script.write_text("import os, time\n"
                      "from gplace.gnn.iteration import search_pool\n"
                      "if __name__ == '__main__':\n"
                      "    with search_pool(1) as ex:\n"
                      "        print(ex.submit(os.getpid).result(), flush=True)\n"
                      "        time.sleep(600)\n")
    run = subprocess.Popen([sys.executable, str(script)], stdout=subprocess.PIPE,
                           stderr=subprocess.PIPE, text=True,
                           env={**os.environ, "PYTHONPATH": str(ROOT)})
    worker = 0
    try:
        ready, _, _ = select.select([run.stdout], [], [], 120)
        line = run.stdout.readline() if ready else ""
        assert line.strip().isdigit(), f"the run did not start its pool: {run.poll()=} {line!r}"
        worker = int(line)
        assert running(worker)
        run.kill()
        run.wait()
        deadline = time.monotonic() + 20
        while running(worker) and time.monotonic() < deadline:
            time.sleep(0.1)
        assert not running(worker)
    finally:
        run.kill()
        run.communicate()
        if worker and running(worker):
            os.kill(worker, signal.SIGKILL)


def running(pid: int) -> bool:
    """The process exists and is not a zombie (an orphan's reaper may be slow in a container)."""
    try:
        return Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0] != "Z"
    except (OSError, IndexError):
        return False


def test_a_slow_corpus_import_reports_its_progress_and_a_cached_one_is_silent():
    from gplace.gnn.iteration import Every
    now, lines = [0.0], []
    every = Every(15.0, lambda k, n: lines.append((k, n)), clock=lambda: now[0])
    for k, dt in enumerate([1.0, 1.0, 14.0, 2.0, 20.0, 1.0], 1):
        now[0] += dt
        every(k, 6)
    assert lines == [(3, 6), (5, 6), (6, 6)]
    now, lines = [0.0], []
    quick = Every(15.0, lambda k, n: lines.append((k, n)), clock=lambda: now[0])
    for k in range(1, 7):
        now[0] += 0.01
        quick(k, 6)
    assert lines == []


def test_rounds_go_on_while_validation_gains_at_least_min_gain():
    from gplace.gnn.iteration import RoundResult, _done

    def done(*vals, **kw):
        cfg = PretrainConfig(**kw)
        return _done(cfg, [RoundResult(k, None, 1, 0.8, v, "s", 1.0, "p")
                           for k, v in enumerate(vals, 1)])

    assert not done(0.60)                            # one round: nothing to compare with
    assert not done(0.60, 0.58)                      # 3.3% better: another round
    assert done(0.60, 0.597)                         # 0.5% better: not worth a round
    assert not done(0.60, 0.597, min_gain=0.0)       # any gain goes on without a threshold
    assert done(0.60, 0.60, min_gain=0.0) and done(0.58, 0.60)
    assert done(0.60, 0.50, rounds=2) and not done(0.60, 0.61, rounds=3)


def test_a_corpus_whose_graphs_are_all_over_the_op_limit_is_one_clear_error(tmp_path):
    from gplace.errors import ConfigError
    from gplace.gnn.iteration import prepare_corpus
    corpus = folder_corpus(tmp_path / "mine")
    log = io.StringIO()
    with pytest.raises(ConfigError, match=r"no training graph within --max-graph-ops 10 \(the "
                                          r"smallest has [0-9,]+ ops\); raise --max-graph-ops"):
        prepare_corpus(tiny(corpus, max_graph_ops=10), log=log)
    assert "left out 2 graphs over --max-graph-ops 10: " in log.getvalue()


def test_a_folder_of_none_batch_graphs_is_imported_at_the_size_given(tmp_path):
    """A SavedModel's or tf.function's None batch is sized 1 unless --unknown-dim says
    otherwise: pretraining says so, imports at the size given, and keys the graph's cached
    experts by it."""
    from tests.importer.test_step import none_batch_step
    from gplace.gnn.corpus import list_corpus, load_corpus_graph
    from gplace.gnn.iteration import prepare_corpus, problem_key_of
    corpus = folder_corpus(tmp_path / "mine")
    (corpus / "step.pb").write_bytes(none_batch_step().SerializeToString())
    keys = {}
    for size in (1, 64):
        log = io.StringIO()
        prepare_corpus(tiny(corpus, unknown_dim=size), log=log)
        note = [l for l in log.getvalue().splitlines() if "unknown dimensions" in l]
        assert note == [f"pretrain: 1 graph has inputs with unknown dimensions (step), sized "
                        f"{size}" + (": a None batch counts as a batch of 1; give the batch the "
                                     "graphs train at (--unknown-dim N)" if size == 1 else
                                     " (--unknown-dim)")]
        entry = next(e for e in list_corpus(corpus, size) if e.name == "step")
        graph = load_corpus_graph(entry)
        x = list(graph.names).index("x")
        assert graph.out_bytes[graph.out_ptr[x]] == size * 32 * 4
        keys[size] = problem_key_of(entry, "post-2gpu")
    assert keys[1] != keys[64]
    from gplace.gnn.pretrain import ProblemPool, problem_specs  # what training reads
    specs = problem_specs(tiny(corpus, unknown_dim=64), "train")
    assert {e.unknown_dim for e, _ in specs} == {64}
    pool = ProblemPool(tiny(corpus, unknown_dim=64), "train", search=False)
    k = next(i for i, (e, _) in enumerate(pool.specs) if e.name == "step")
    graph = pool.state(k).problem.graph
    assert graph.out_bytes[graph.out_ptr[list(graph.names).index("x")]] == 64 * 32 * 4


def test_a_folders_pytorch_programs_are_read_with_the_optimizer_given(tmp_path):
    """A .pt2 in a folder corpus is a training graph like a .pb: its step adds --optimizer's
    updates, and its cached experts are kept apart per optimizer."""
    from gplace.examples.torch.build import export_example
    from gplace.gnn.corpus import list_corpus, load_corpus_graph
    from gplace.gnn.iteration import prepare_corpus, problem_key_of
    corpus = folder_corpus(tmp_path / "mine")
    export_example("gnn", corpus)
    keys, states = {}, {}
    for optimizer in ("sgd", "adam"):
        log = io.StringIO()
        prepare_corpus(tiny(corpus, optimizer=optimizer), log=log)
        assert "pretrain: corpus " in log.getvalue() and ": 3 graphs (3 train)" in log.getvalue()
        entries = {e.name: e for e in list_corpus(corpus, optimizer=optimizer)}
        assert entries["gnn"].optimizer == optimizer and entries["small_resnet"].optimizer is None
        graph = load_corpus_graph(entries["gnn"])
        assert graph.meta["import"]["optimizer"] == optimizer
        states[optimizer] = int(graph.param_bytes.sum())
        keys[optimizer] = problem_key_of(entries["gnn"], "post-2gpu")
        assert problem_key_of(entries["small_resnet"], "post-2gpu") == \
            problem_key_of(replace(entries["small_resnet"], optimizer=None), "post-2gpu")
    assert keys["sgd"] != keys["adam"]
    # the weights, Adam's two moments and its step counts
    assert 3 * states["sgd"] <= states["adam"] < 3.01 * states["sgd"]


def test_a_program_gplaces_checks_refuse_is_read_only_with_trust_pt2(tmp_path):
    """A .pt2 with a member the checks refuse (one torch.export.save does not write) is
    skipped with the import's one line, and read with --trust-pt2; the switch on a corpus
    without programs is one line."""
    import zipfile
    from gplace.examples.torch.build import export_example
    from gplace.gnn.corpus import list_corpus, load_corpus_graph
    from gplace.gnn.iteration import prepare_corpus
    corpus = folder_corpus(tmp_path / "mine")
    plain = export_example("gnn", tmp_path)
    with zipfile.ZipFile(plain) as src, zipfile.ZipFile(corpus / "extra.pt2", "w") as dst:
        for info in src.infolist():
            dst.writestr(info, src.read(info.filename))
        dst.writestr(f"{src.namelist()[0].split('/')[0]}/data/notes.bin", b"\x00")
    log = io.StringIO()
    prepare_corpus(tiny(corpus), log=log)
    assert "pretrain: skipped extra.pt2: " in log.getvalue() and "--trust-pt2" in log.getvalue()
    log = io.StringIO()
    prepare_corpus(tiny(corpus, trust_pt2=True), log=log)
    assert "skipped" not in log.getvalue() and ": 3 graphs (3 train)" in log.getvalue()
    entry = next(e for e in list_corpus(corpus, trust=True) if e.name == "extra")
    assert entry.trust and load_corpus_graph(entry).num_ops > 50
    (corpus / "extra.pt2").unlink()
    proc = gplace(["--corpus", str(corpus), "--trust-pt2", "--out", "out/p.pt"], tmp_path,
                  timeout=120)
    assert proc.returncode == 2 and proc.stderr.strip().splitlines() == [
        f"gplace pretrain: error: --trust-pt2 applies to PyTorch (.pt2) programs; {corpus} "
        "has none"]


def test_an_optimizer_for_no_program_or_unknown_is_one_line(tmp_path):
    corpus = folder_corpus(tmp_path / "mine")
    proc = gplace(["--corpus", str(corpus), "--optimizer", "adam", "--out", "out/p.pt"],
                  tmp_path, timeout=120)
    assert proc.returncode == 2 and proc.stderr.strip().splitlines() == [
        f"gplace pretrain: error: --optimizer applies to PyTorch (.pt2) programs; {corpus} has "
        "none (a TensorFlow graph has its own optimizer)"]
    (corpus / "step.pt2").write_bytes(b"PK")  # not read: the name fails first
    proc = gplace(["--corpus", str(corpus), "--optimizer", "adagrad", "--out", "out/p.pt"],
                  tmp_path, timeout=120)
    assert proc.returncode == 2 and "unknown optimizer 'adagrad'" in proc.stderr
    assert len(proc.stderr.strip().splitlines()) == 1 and not (tmp_path / "out").exists()


def test_expert_iteration_refuses_rounds_that_would_never_validate(tmp_path):
    from gplace.errors import ConfigError
    from gplace.gnn.iteration import run_iteration
    with pytest.raises(ConfigError, match="--val-every 5 is over --max-steps 4: a round would "
                                          "never validate"):
        run_iteration(tiny(tmp_path, val_every=5), tmp_path / "p.pt", tmp_path / "run")
    assert not (tmp_path / "run").exists()


def test_two_files_that_would_share_a_graph_name_are_refused(tmp_path):
    from gplace.errors import ConfigError
    from gplace.gnn.corpus import list_corpus
    corpus = folder_corpus(tmp_path / "mine")
    shutil.copy(GRAPHS[0], corpus / "m.v1.pb")
    shutil.copy(GRAPHS[1], corpus / "m.v2.pb")
    with pytest.raises(ConfigError, match="m.v1.pb and m.v2.pb both name the graph 'm'"):
        list_corpus(str(corpus))


def test_the_default_corpus_is_found_inside_the_clone_and_named_outside_it(tmp_path):
    outside = gplace(["--max-steps", "1", "--val-every", "2"], tmp_path, timeout=120)
    assert outside.returncode == 2
    assert "this is not inside a clone of it: pass --corpus DIR" in outside.stderr
    inside = gplace(["--max-steps", "1", "--val-every", "2"], ROOT / "finetune", timeout=120)
    assert inside.returncode == 2 and "--val-every 2 is over --max-steps 1" in inside.stderr


def test_a_resumed_round_keeps_its_earlier_sessions_time_and_searches(tmp_path):
    from gplace.gnn.iteration import RoundClock, _merge_searched
    first = RoundClock(tmp_path)
    first.earlier = 40.0  # as if 40 s had run before this session
    first.save()
    again = RoundClock(tmp_path)
    assert 40.0 <= again.seconds() < 45.0
    path = tmp_path / "experts_rank0.json"
    path.write_text(json.dumps([["a@post-2gpu", 1.0, 2.0, True], ["b@post-2gpu", 1.0, 2.0, False]]))
    rows = _merge_searched(path, [("a@post-2gpu", 1.0, 2.0, False),
                                  ("b@post-2gpu", 1.0, 2.0, False)])
    assert [r[3] for r in rows] == [True, False]  # a was searched by the session before


def test_what_a_folder_corpus_does_not_read_or_reads_twice_is_said(tmp_path):
    from gplace.gnn.corpus import left_aside
    corpus = folder_corpus(tmp_path / "mine")
    (corpus / "nested").mkdir()
    (corpus / "step.pt2").write_bytes(b"PK")
    (corpus / "again.pt2").write_bytes(b"PK")
    shutil.copy(GRAPHS[0], corpus / "copy.pb")
    first, second = sorted(["copy.pb", GRAPHS[0].name])
    assert sorted(left_aside(corpus)) == sorted([
        f"{second} holds the same bytes as {first}: that graph counts twice",
        "nested/ is a folder, not a SavedModel: its graphs are not read",
        "step.pt2 holds the same bytes as again.pt2: that graph counts twice"])


def test_round_one_from_the_users_policy_searches_and_from_none_reuses_the_cache(
        tmp_path, monkeypatch):
    """Round 1 imitates the cached experts (the archive's, earlier runs') when it starts from
    the untrained network, but specializing a policy (--init) wants experts searched from it."""
    from gplace.gnn import iteration
    corpus = folder_corpus(tmp_path / "c")
    asked = []
    monkeypatch.setattr(iteration, "expert_of", lambda cfg, i, only_missing: (
        asked.append(only_missing) or ((f"p{i}", 1.0, 1.0, True), 0.0)))
    cfg = PretrainConfig(corpus=str(corpus), clusters=("post-2gpu",), random_clusters=0)
    iteration.search_experts(cfg, 1, 0, 1, 1, log=io.StringIO())
    iteration.search_experts(replace(cfg, init_from="policy.pt"), 1, 0, 1, 1, log=io.StringIO())
    iteration.search_experts(cfg, 2, 0, 1, 1, log=io.StringIO())
    n = len(asked) // 3
    assert asked == [True] * n + [False] * n + [False] * n and n == 2


def test_a_corpus_folder_that_cannot_hold_the_cache_is_one_clear_error(tmp_path):
    from gplace.errors import ConfigError
    from gplace.gnn.cache import check_writable
    (tmp_path / "blocker").write_text("a file where the cache's folder would go")
    with pytest.raises(ConfigError, match=r"blocker/\.gplace-cache: cannot write there .*copy"):
        check_writable([tmp_path / "blocker" / "g.pb"])
    check_writable([tmp_path / "g.pb"])
    assert (tmp_path / ".gplace-cache").is_dir()


def test_a_resumed_round_reports_the_best_validation_from_before_the_interruption():
    from types import SimpleNamespace

    from gplace.gnn.iteration import ProgressLines
    from gplace.gnn.validation import VAL_METRICS
    before, out = ProgressLines(1, 300, io.StringIO()), io.StringIO()
    before.best = 0.7788  # validated before the checkpoint was written
    after = ProgressLines(1, 300, out)
    after.load_state_dict(before.state_dict())  # what Lightning does on resume
    module = SimpleNamespace(cfg=SimpleNamespace(validate="zero-shot"), step=300)
    trainer = SimpleNamespace(callback_metrics={VAL_METRICS["zero-shot"]: 0.7979},
                              is_global_zero=True)
    after.on_validation_end(trainer, module)
    assert "step 300/300: validation 0.7979 (best 0.7788;" in out.getvalue()
