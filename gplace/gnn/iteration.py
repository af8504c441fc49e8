"""Expert iteration over a corpus, the recipe of ``gplace pretrain`` (Anthony, Tian and
Barber 2017, "Thinking Fast and Slow with Deep Learning and Tree Search").

Each round searches an expert for every training problem (gplace.gnn.experts: the fine-tuning
pipeline from the round's starting policy, seeded with the heuristics and every earlier expert
of the problem), imitates the best expert of each problem (gplace.gnn.pretrain) and validates;
the next round searches from the new policy, until a round improves the best validation
figure by less than ``min_gain`` (relative) or ``rounds`` are done. The first round searches
only the problems that have no expert cached yet, so a corpus whose experts were restored from
an archive starts with the imitation. A run from
``init_from`` (``gplace pretrain --init``) validates that policy first: when no round beats it
on validation, the command writes it back unchanged, so specializing never hands back a policy
that validates worse than the one it started from.

Everything is resumable: experts are cached beside the corpus as soon as each is found, a
round's imitation continues from its last Lightning checkpoint, and a finished round
(``round<k>/result.json`` in the run folder) is not redone.

Parallel searches: ``jobs`` local processes per rank, and under Lightning's DDP launcher
(``devices`` x ``num_nodes`` ranks) rank r searches problems r, r + world, ...; the experts
meet in the corpus' cache folder (one folder that every node sees) before imitation starts.
"""

from __future__ import annotations

import json
import math
import multiprocessing
import os
import sys
import time
from concurrent.futures import ProcessPoolExecutor, as_completed
from dataclasses import asdict, replace
from pathlib import Path
from typing import NamedTuple

import lightning as L
import numpy as np

from gplace.errors import ConfigError
from gplace.gnn.cache import graph_key
from gplace.gnn.config import PretrainConfig
from gplace.gnn.corpus import load_corpus_graph
from gplace.gnn.experts import cached_experts, expert_folder, expert_name
from gplace.gnn.pretrain import ProblemPool, _jsonable, cluster_of, graph_ops, run_pretrain
from gplace.gnn.validation import VAL_METRICS, geomean, val_key
from gplace.io import atomic_write_bytes, atomic_write_text, read_checkpoint

RESULT = "result.json"
START = "start.json"  # the starting policy's validation (a run from init_from)
JOB_MEMORY = 4 << 30  # bytes a search process may take (the training graphs, one search)


def default_jobs(ranks_here: int = 1) -> int:
    """Search processes per rank by default: the cores this process may run on, shared by the
    node's ``ranks_here`` ranks, and at most one per JOB_MEMORY of the machine's memory."""
    cores = len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else os.cpu_count()
    jobs = max(1, (cores or 1) // max(1, ranks_here))
    try:
        memory = os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES")
    except (AttributeError, ValueError, OSError):
        return jobs
    return max(1, min(jobs, memory // (JOB_MEMORY * max(1, ranks_here))))


class RoundResult(NamedTuple):
    round: int
    start: str | None               # the checkpoint its experts were searched from
    searched: int                   # expert searches run in this round (all ranks)
    experts_vs_heuristic: float     # geomean over the training problems (simulated)
    val: float                      # best validation figure (PretrainConfig.validate) / best
                                    # heuristic (geomean)
    selected: str                   # the validation checkpoint it ships
    seconds: float                  # wall time of the round
    policy: str                     # the round's policy file

    def experts_text(self) -> str:
        """The experts against the best heuristic, for the log ("no experts" without any)."""
        if math.isnan(self.experts_vs_heuristic):
            return "no experts"
        return f"experts {self.experts_vs_heuristic:.4f}x the best heuristic"


IMPORT_REPORT_S = 15.0  # a line on the corpus' import at most this often (none if it is cached)


class Every:
    """Calls ``report(done, total)`` when at least ``seconds`` passed since it was made or
    last reported, and at the last call (``done == total``) if it reported before."""

    def __init__(self, seconds: float, report, clock=time.monotonic):
        self.seconds, self.report, self.clock = seconds, report, clock
        self.last, self.reported = clock(), False

    def __call__(self, done: int, total: int) -> None:
        now = self.clock()
        if now - self.last >= self.seconds or (self.reported and done == total):
            self.report(done, total)
            self.last, self.reported = now, True


def prepare_corpus(cfg: PretrainConfig, restore: str | Path | None = None,
                   log=sys.stderr) -> None:
    """Lists the corpus (ConfigError: unreadable manifest, no training graph that imports
    within ``max_graph_ops``), says which graphs are skipped because they do not import or
    are over ``max_graph_ops``, and restores the experts archive
    (``restore``, else the corpus folder's ``experts.npz``) into the cache, where it drops
    what graphs or profiles changed since (gplace.gnn.cache.drop_stale)."""
    from gplace.gnn.cache import check_writable, drop_stale
    from gplace.gnn.corpus import describe, importable, left_aside, list_corpus
    from gplace.gnn.experts import corpus_archive, restore_archive
    entries = list_corpus(cfg.corpus, cfg.unknown_dim, cfg.optimizer, cfg.trust_pt2)
    check_writable([e.path for e in entries])
    good, bad = importable([e for e in entries if e.split in ("train", "validation")],
                           Every(IMPORT_REPORT_S, lambda k, n: print(
                               f"pretrain: importing the corpus' graphs: {k} of {n} (each is "
                               f"cached for the next run)", file=log, flush=True)))
    for e, why in bad:
        print(f"pretrain: skipped {e.path.name}: {why}", file=log, flush=True)
    for note in left_aside(cfg.corpus):
        print(f"pretrain: {note}", file=log, flush=True)
    if not any(e.split == "train" for e in good):
        raise ConfigError(f"{cfg.corpus}: no training graph that imports "
                          f"({len(bad)} skipped)")
    over = [e for e in good if graph_ops(e) > cfg.max_graph_ops]
    if over:
        print(f"pretrain: left out {len(over)} graph{'s' if len(over) > 1 else ''} over "
              f"--max-graph-ops {cfg.max_graph_ops:,}: " + ", ".join(
                  f"{e.path.name} ({graph_ops(e):,} ops)" for e in over[:5])
              + (", ..." if len(over) > 5 else ""), file=log, flush=True)
    if not any(e.split == "train" and e not in over for e in good):
        smallest = min(graph_ops(e) for e in good if e.split == "train")
        raise ConfigError(f"{cfg.corpus}: no training graph within --max-graph-ops "
                          f"{cfg.max_graph_ops:,} (the smallest has {smallest:,} ops); "
                          "raise --max-graph-ops")
    skipped = {id(e) for e, _ in bad} | {id(e) for e in over}
    kept = [e for e in entries if id(e) not in skipped]
    print(f"pretrain: corpus {cfg.corpus}: {describe(kept)}"
          + (f" ({len(bad) + len(over)} left out)" if bad or over else ""), file=log,
          flush=True)
    unsized = [e.name for e in good if e not in over  # imported already, test split aside
               and load_corpus_graph(e).meta.get("import", {}).get("sized_inputs")]
    if unsized:
        print(f"pretrain: {len(unsized)} graph{'s have' if len(unsized) > 1 else ' has'} "
              f"inputs with unknown dimensions ({', '.join(unsized[:3])}"
              f"{', ...' if len(unsized) > 3 else ''}), sized {cfg.unknown_dim}"
              + (": a None batch counts as a batch of 1; give the batch the graphs train at "
                 "(--unknown-dim N)" if cfg.unknown_dim == 1 else " (--unknown-dim)"),
              file=log, flush=True)
    archive = restore or corpus_archive(cfg.corpus)
    if archive is not None:
        w, p, f = restore_archive(entries, archive)
        print(f"pretrain: restored {w} experts from {archive} ({p} already cached, {f} of "
              f"other graphs)", file=log, flush=True)
    dropped = drop_stale(kept)
    if dropped:
        print(f"pretrain: dropped {dropped} cached seed and expert files of graphs or profiles "
              f"that changed since they were cached", file=log, flush=True)


def run_iteration(cfg: PretrainConfig, out: Path, run_dir: Path, jobs: int = 1,
                  devices: int = 1, num_nodes: int = 1, progress: bool = False,
                  log=sys.stderr) -> list[RoundResult]:
    """Rounds of expert iteration in ``run_dir`` (resumed where it stands); writes the best
    round's policy to ``out`` and its card to ``out.with_suffix('.md')``. A ConfigError where
    a round would never validate: rounds are kept or dropped by their validation figure."""
    cfg.check_rounds_validate()
    check_run_folder(cfg, run_dir)
    results: list[RoundResult] = []
    while not _done(cfg, results):
        k = len(results) + 1
        folder = run_dir / f"round{k}"
        if not (folder / RESULT).exists():
            _round(cfg, k, results, folder, jobs, devices, num_nodes, progress, log)
        results.append(RoundResult(**json.loads((folder / RESULT).read_text())))
        r = results[-1]
        if is_first_process():
            print(f"pretrain: round {k} done: validation {r.val:.4f} ({cfg.validate} / best "
                  f"heuristic; {r.selected}), {r.experts_text()}, {r.searched} searched, "
                  f"{r.seconds:.0f} s", file=log, flush=True)
    start = validate_start(cfg, run_dir, log) if cfg.init_from and _rank() == 0 else None
    best = min(([start] if start else []) + results, key=lambda r: r.val)
    if _rank() == 0:
        atomic_write_bytes(out, Path(best.policy).read_bytes())
        from gplace.gnn.card import write_card
        write_card(out.with_suffix(".md"), cfg, results, best, run_dir, start,
                   devices * num_nodes)
        which = f"round {best.round}" if best.round else "the starting policy (no round beat it)"
        print(f"pretrain: {which} is the best on validation ({best.val:.4f}); wrote "
              f"{out} and {out.with_suffix('.md')}", file=log, flush=True)
    return results


def validate_start(cfg: PretrainConfig, run_dir: Path, log=sys.stderr) -> RoundResult:
    """The starting point of a run from ``cfg.init_from`` (a RoundResult numbered 0): that
    policy's validation figure on the run's validation problems
    (gplace.gnn.pretrain.validation_pool), by the rule the rounds are chosen by; computed once
    and kept in the run folder."""
    path = run_dir / START
    if path.exists():
        return RoundResult(**json.loads(path.read_text()))
    from gplace.gnn.infer import policy_weights
    from gplace.gnn.policy import GNNPolicy
    from gplace.gnn.pretrain import validation_pool
    from gplace.gnn.validation import validation_figures, validation_rows
    began = time.perf_counter()
    policy = GNNPolicy.load(cfg.init_from)[0]
    pool = validation_pool(cfg, ProblemPool(cfg, "train", search=False))
    rows = validation_rows(policy, policy_weights(policy), pool, range(len(pool)))
    val = validation_figures(np.array(rows), cfg.validate)[VAL_METRICS[cfg.validate]]
    result = RoundResult(0, str(cfg.init_from), 0, float("nan"), float(val),
                         "the starting policy (--init), untrained here",
                         round(time.perf_counter() - began, 1), str(cfg.init_from))
    atomic_write_text(path, json.dumps(result._asdict(), indent=1))
    print(f"pretrain: the starting policy {cfg.init_from} validates at {val:.4f} "
          f"({cfg.validate} / best heuristic)", file=log, flush=True)
    return result


def _done(cfg: PretrainConfig, results: list[RoundResult]) -> bool:
    if not results:
        return False
    if cfg.expert_budget == 0:
        return True  # no experts to iterate on: one pretraining run
    if cfg.rounds:
        return len(results) >= cfg.rounds
    return len(results) >= 2 and (results[-1].val
                                  >= min(r.val for r in results[:-1]) * (1 - cfg.min_gain))


class RoundClock:
    """A round's wall time over the sessions that ran it: the time recorded by earlier
    sessions (``seconds.json`` in the round's folder, saved at each validation, where a
    resumed run starts again) plus this session's."""

    def __init__(self, folder: Path):
        self.path, self.began = folder / "seconds.json", time.perf_counter()
        self.earlier = float(json.loads(self.path.read_text())) if self.path.exists() else 0.0

    def seconds(self) -> float:
        return self.earlier + time.perf_counter() - self.began

    def save(self) -> None:
        atomic_write_text(self.path, json.dumps(round(self.seconds(), 1)))


def _merge_searched(path: Path, rows: list) -> list:
    """This rank's expert rows; a problem searched by an earlier session of the round counts
    as searched (a resumed round finds its experts in the cache)."""
    if path.exists():
        before = {r[0]: r[3] for r in json.loads(path.read_text())}
        rows = [[*r[:3], bool(r[3] or before.get(r[0], False))] for r in rows]
    return rows


def _round(cfg, k, results, folder, jobs, devices, num_nodes, progress, log) -> None:
    start = (cfg.expert_from or cfg.init_from) if k == 1 else results[-1].policy
    rcfg = replace(cfg, expert_from=start if cfg.expert_budget else None)
    folder.mkdir(parents=True, exist_ok=True)
    clock = RoundClock(folder)
    found: list = []

    def before_fit(rank: int, world: int, barrier) -> None:
        if cfg.expert_budget:
            path = folder / f"experts_rank{rank}.json"
            found[:] = _merge_searched(path, search_experts(rcfg, k, rank, world, jobs, log))
            atomic_write_text(path, json.dumps(found))
            if rank == 0:
                clock.save()
        barrier("experts")  # every rank's experts are in the cache

    last = folder / "checkpoints" / "last.ckpt"
    if last.exists() and _rank() == 0:
        step = int(read_checkpoint(last, "checkpoint to resume (delete it to restart the round)")
                   ["global_step"]) // cfg.learn.ppo_epochs
        print(f"pretrain: round {k}: resuming the imitation at step {step}/{cfg.max_steps} "
              f"from {last}", file=log, flush=True)
    policy = folder / "policy.pt"
    run_pretrain(rcfg, policy, folder, resume=last.exists(), devices=devices,
                 num_nodes=num_nodes, progress=progress, log=log, before_fit=before_fit,
                 callbacks=[ProgressLines(k, rcfg.max_steps, log, clock)], meta={"round": k})
    if _rank() == 0:
        from gplace.gnn.policy import GNNPolicy
        meta = GNNPolicy.load(policy)[1]
        rows = [r for f in sorted(folder.glob("experts_rank*.json"))
                for r in json.loads(f.read_text())]
        result = RoundResult(
            k, None if start is None else str(start), sum(r[3] for r in rows),
            geomean([r[1] / r[2] for r in rows]) if rows else float("nan"),
            # inf: no validation ran (max_steps < val_every)
            float(meta.get(val_key(rcfg)) or np.inf), meta["selected"],
            round(clock.seconds(), 1), str(policy))
        atomic_write_text(folder / RESULT, json.dumps(result._asdict(), indent=1))
    _barrier()


def search_experts(cfg: PretrainConfig, k: int, rank: int, world: int, jobs: int,
                   log=sys.stderr) -> list[tuple[str, float, float, bool]]:
    """This rank's share of round ``k``'s expert searches (problems rank, rank + world, ...)
    in ``jobs`` processes: (problem, best expert time, best heuristic time, searched) each.
    Round 1 searches only problems without a cached expert (the archive's, earlier runs'),
    unless it starts from a policy of the user's (``--init``: specializing it wants experts
    searched from it); later rounds search every problem. An expert of the same start,
    budget and seed is never searched twice."""
    n = len(ProblemPool(cfg, "train", search=False))
    todo = list(range(rank, n, world))
    who = f"round {k}" + (f", rank {rank}/{world}" if world > 1 else "")
    print(f"pretrain: {who}: experts of {len(todo)} training problems ({cfg.expert_budget} "
          f"samples from {cfg.expert_from or 'the untrained network'})", file=log, flush=True)
    rows = []

    def report(row, seconds):
        rows.append(row)
        name, t, h, searched = row
        print(f"pretrain: {who}: expert {len(rows)}/{len(todo)} {name}: {t / h:.3f}x the best "
              f"heuristic ({'searched' if searched else 'cached'}, {seconds:.0f} s)",
              file=log, flush=True)

    only_missing = k == 1 and cfg.init_from is None
    if jobs <= 1:
        for i in todo:
            report(*expert_of(cfg, i, only_missing))
    else:
        with search_pool(jobs) as ex:
            for f in as_completed([ex.submit(expert_of, cfg, i, only_missing) for i in todo]):
                report(*f.result())
    return sorted(rows)


def search_pool(jobs: int) -> ProcessPoolExecutor:
    """``jobs`` search processes, spawned, not forked: after a round's imitation this process
    holds the training pool (gigabytes), which forked workers would inherit and copy as they
    touch it. Each dies with this process: one killed by a signal that skips clean-up
    (SIGTERM, SIGKILL) would otherwise leave its workers searching, then holding their memory."""
    from gplace.real.procs import die_with_parent
    return ProcessPoolExecutor(jobs, mp_context=multiprocessing.get_context("spawn"),
                               initializer=die_with_parent, initargs=(os.getpid(),))


_POOLS: dict = {}  # per process: listing the problems loads every graph once


def expert_of(cfg: PretrainConfig, i: int, only_missing: bool):
    """((problem, best expert time, best heuristic time, searched), seconds) of training
    problem ``i``, searching its expert unless cached (or, with ``only_missing``, unless the
    problem has any cached expert)."""
    import torch
    torch.set_num_threads(cfg.threads)
    if cfg not in _POOLS:
        _POOLS.clear()
        _POOLS[cfg] = ProblemPool(cfg, "train")
    pool = _POOLS[cfg]
    began = time.perf_counter()
    entry, c = pool.specs[i]
    key = problem_key_of(entry, c)
    mine = expert_folder(entry.path) / expert_name(entry.name, key, cfg.expert_budget, cfg.seed,
                                                   cfg.expert_from, cfg.order)
    searched = not mine.exists() and not (only_missing and cached_experts(entry, key, cfg.seed))
    pool.search = searched
    st = pool.state(i)
    pool.states.pop(i)  # the search's pool is not the training pool: free the memory
    return ((pool.names[i], float(st.best_time_s), float(st.ref_time_s or np.inf), searched),
            time.perf_counter() - began)


def problem_key_of(entry, spec) -> str:
    """The cache key of problem (entry, spec) without building the problem's costs."""
    g = load_corpus_graph(entry)
    return graph_key(cluster_of(spec), g, int(g.group.max()) + 1 if g.num_ops else 0,
                     entry.profile is not None)


class ProgressLines(L.Callback):
    """One line per validation: the round, the step and the validation figure; ``clock``:
    the round's RoundClock, brought up to date there (where a resumed run starts again)."""

    def __init__(self, k: int, max_steps: int, log, clock=None):
        self.k, self.max_steps, self.stream, self.best = k, max_steps, log, np.inf
        self.clock = clock

    def state_dict(self) -> dict:  # kept in the checkpoint: a resumed round knows its best
        return {"best": self.best}

    def load_state_dict(self, state_dict: dict) -> None:
        self.best = float(state_dict["best"])

    def on_validation_end(self, trainer, module) -> None:
        rule = module.cfg.validate
        val = trainer.callback_metrics.get(VAL_METRICS[rule])
        if val is None or not trainer.is_global_zero:
            return
        if self.clock is not None:
            self.clock.save()
        self.best = min(self.best, float(val))
        print(f"pretrain: round {self.k} step {module.step}/{self.max_steps}: validation "
              f"{float(val):.4f} (best {self.best:.4f}; {rule} / best heuristic, geomean)",
              file=self.stream, flush=True)


def check_run_folder(cfg: PretrainConfig, run_dir: Path) -> None:
    """A run folder holds one run: the first call writes its config, a later one must match
    (resuming another config's rounds would mix two runs)."""
    path = run_dir / "config.json"
    # how many rounds to run is not part of a run: a run continues with more or fewer
    mine = asdict(replace(cfg, rounds=0))
    mine.pop("min_gain")
    mine = json.dumps(_jsonable(mine), indent=1, sort_keys=True)
    if path.exists():
        theirs = json.loads(path.read_text())
        # a run written before --validate existed validated the greedy rollout
        if "validate" not in theirs and cfg.validate != "greedy":
            raise ConfigError(f"{run_dir} holds a run that validates the greedy rollout; add "
                              f"--validate greedy to resume it, or give another --log-dir or "
                              f"--out, or remove it to start over")
        # ... read op types through a 16-channel embedding, learned in one order and
        # imported graphs with their unknown dimensions sized 1 (and no PyTorch program)
        before = {"validate": "greedy", "type_channels": 16, "train_orders": "policy",
                  "unknown_dim": 1, "optimizer": "sgd", "trust_pt2": False}
        if json.dumps({**before, **theirs}, indent=1, sort_keys=True) != mine:
            raise ConfigError(f"{run_dir} holds a run of another configuration ({path}); give "
                              f"another --log-dir or --out, or remove it to start over")
    elif _rank() == 0:
        atomic_write_text(path, mine)
    check_corpus_costs(cfg, run_dir)


def corpus_costs(corpus: str | Path) -> dict[str, list]:
    """{graph name: [its file's size in bytes, the start of its profile's SHA-256 or None for
    estimated costs]} of the training and validation graphs: what the run's experts and weights
    were searched on (a graph file is named by its size: hashing a corpus of hundreds of MB at
    every start would cost seconds)."""
    import hashlib
    from gplace.gnn.corpus import list_corpus
    return {e.name: [_size(e.path),
                     hashlib.sha256(e.profile.read_bytes()).hexdigest()[:16] if e.profile
                     else None]
            for e in list_corpus(corpus) if e.split in ("train", "validation")}


def _size(path: Path) -> int:
    """Bytes of a graph file, or of every file of a SavedModel directory."""
    path = Path(path)
    return (sum(f.stat().st_size for f in path.rglob("*") if f.is_file()) if path.is_dir()
            else path.stat().st_size)


def check_corpus_costs(cfg: PretrainConfig, run_dir: Path) -> None:
    """A run folder resumes only on the costs it started with: a graph that gained, lost or
    changed its profile (``gplace profile``, new run counts) gives other problems, and the
    rounds already done would be kept as they were. The first call writes corpus_costs.json; a
    run folder from before that file existed is taken as it is."""
    path = run_dir / "corpus_costs.json"
    try:
        mine = corpus_costs(cfg.corpus)
    except ConfigError:
        return  # no corpus to compare: listing it later says what is wrong
    if not path.exists():
        if _rank() == 0:
            atomic_write_text(path, json.dumps(mine, indent=1, sort_keys=True))
        return
    theirs = json.loads(path.read_text())
    changed = sorted(n for n in set(mine) | set(theirs) if mine.get(n) != theirs.get(n))
    if changed:
        shown = ", ".join(changed[:3]) + (f" and {len(changed) - 3} more" if len(changed) > 3
                                          else "")
        raise ConfigError(f"{run_dir} holds a run made on other costs: the graphs or profiles "
                          f"of {shown} changed since; give another --log-dir or --out, or "
                          f"remove it to start over")


def _rank() -> int:
    """This process's rank: the process group's while there is one, else 0 only for the
    first process of the first node (Lightning's launcher gives the others LOCAL_RANK or
    NODE_RANK; after a fit the group is gone, and every process would say 0)."""
    import torch.distributed as dist
    if dist.is_available() and dist.is_initialized():
        return dist.get_rank()
    return int(os.environ.get("LOCAL_RANK", 0) or 0) + int(os.environ.get("NODE_RANK", 0) or 0)


def is_first_process() -> bool:
    """Whether this is the process that writes and reports a run's results."""
    return _rank() == 0


def _barrier() -> None:
    import torch.distributed as dist
    if dist.is_available() and dist.is_initialized():
        dist.barrier()
