"""One pretraining run of the list-scheduler policy over a corpus with Post's objective
(Gao, Chen and Li, NeurIPS 2018); expert iteration (gplace.gnn.iteration) runs one per round.

Problems are (graph, cluster) pairs of the training split at full granularity (colocation
groups), over the preset clusters and over random clusters (gplace.gnn.random_clusters). Each
training step takes ``problems_per_step`` of them, rolls out K placements each, simulates them
in one batch per problem and applies :mod:`gplace.gnn.learn` (rewards relative to the problem's
best heuristic). Elite sets start with the heuristics' placements and keep the best samples.
Validation (gplace.gnn.validation): each validation problem's zero-shot placement by the
policy's own rollouts (the best of the greedy and sampled rollouts in both of the list
scheduler's orders, gplace.gnn.infer.best_rollout; ``gplace place`` adds the untrained network's
rollouts, the same for every checkpoint), and its greedy rollout in the policy's order alone,
against its best heuristic, as geometric means; the share at or below it. ``validate`` says
which of the two picks the checkpoint (and, in expert iteration, the round).

Which problems a step takes and the rollouts' random numbers are functions of (seed, step), and
the elite sets are saved in the checkpoint, so a resumed run is the very run it resumes.
Lightning gives checkpoints, CSV and TensorBoard logs, and DDP (``--devices``, ``--num-nodes``).
"""

from __future__ import annotations

import copy
import functools
import sys
import warnings
import weakref
from dataclasses import asdict, replace
from datetime import timedelta
from pathlib import Path

import lightning as L
import numpy as np
import torch
from torch.utils.data import DataLoader

from gplace.cluster import Cluster, load_cluster
from gplace.cost import CostModel
from gplace.errors import ConfigError
from gplace.gnn.config import PretrainConfig
from gplace.gnn.corpus import (CorpusGraph, describe, import_error, list_corpus,
                                load_corpus_graph)
from gplace.gnn.cache import cached, placements_of, problem_key
from gplace.gnn.experts import cached_experts, expert_folder, expert_name, search_expert
from gplace.gnn.infer import policy_weights
from gplace.gnn.learn import ProblemState, loss, sample
from gplace.gnn.lightning_io import (ResumeCheckpoint, averaging, quiet_lightning_tips,
                                     select_best)
from gplace.gnn.policy import GNNPolicy
from gplace.gnn.random_clusters import random_cluster
from gplace.gnn.schedule import build_sched
from gplace.gnn.shared_arrays import ArrayPool
from gplace.gnn.validation import (VAL_METRICS, geomean, val_key, validation_figures,
                                    validation_rows)
from gplace.graph import OpGraph
from gplace.io import read_checkpoint
from gplace.placers import SimMeasurer, get_placer
from gplace.placers.base import cheap_heuristics
from gplace.problem import PlacementProblem
from gplace.profile import CostProfile


def problem_specs(cfg: PretrainConfig, split: str) -> list[tuple[CorpusGraph, str | int]]:
    """(graph, cluster) pairs of one split: presets by name, random clusters by seed."""
    entries = [e for e in list_corpus(cfg.corpus, cfg.unknown_dim, cfg.optimizer, cfg.trust_pt2)
               if e.split == split]
    per_graph = cfg.random_clusters if split == "train" else min(cfg.random_clusters, 1)
    specs = []
    for i, e in enumerate(entries):
        if (e.ops is None or e.ops <= cfg.max_graph_ops) and import_error(e) is not None:
            continue  # a graph that does not import (its neighbours keep their seeds)
        specs += [(e, c) for c in cfg.clusters]
        base = (1 if split == "train" else 2) * 1_000_000 + cfg.seed * 10_000 + i * 10
        specs += [(e, base + j) for j in range(per_graph)]
    return specs


def cluster_of(spec: str | int) -> Cluster:
    return random_cluster(spec) if isinstance(spec, int) else load_cluster(spec)


def build_state(entry: CorpusGraph, cluster: Cluster, elite_size: int, expert_budget: int = 0,
                expert_seed: int = 0, expert_from: str | None = None,
                search: bool = True, order: str = "rank",
                graph: OpGraph | None = None) -> ProblemState:
    """A full-granularity problem whose elite set starts with the heuristics' placements
    (cached beside the corpus: they are deterministic, and m-ETF takes seconds on big graphs)
    and, with ``expert_budget``, the problem's experts (gplace.gnn.experts, cached too): the
    one of this budget, seed and starting network, searched here if ``search`` and not cached
    yet, and every other cached expert of the problem. The reference time (rewards,
    validation) stays the best heuristic's. ``order``: the policy's (GNNPolicy), which the
    problem's list scheduler follows. ``graph``: ``entry`` already imported."""
    graph = graph if graph is not None else load_corpus_graph(entry)
    model = CostModel()
    if entry.profile is not None:
        model.add_profile(replace(CostProfile.load(entry.profile), graph=entry.name))
    problem = PlacementProblem.build(graph, cluster, model)
    measurer = SimMeasurer(problem)
    key = problem_key(problem, entry.profile is not None)
    valid = placements_of(problem.num_units, problem.num_devices)
    seeds = list(cached(entry.path, "seeds", f"{entry.name}-{key}.npy", lambda: np.stack(
        [get_placer(h).place(problem, measurer, 0).placement for h in cheap_heuristics()]),
        valid))
    state = ProblemState(problem, measurer, seeds, elite_size=elite_size,
                         dispatch=order == "dispatch")
    if expert_budget > 0:
        name = expert_name(entry.name, key, expert_budget, expert_seed, expert_from, order)
        # earlier rounds' experts of this problem (other budgets or starting networks) seed
        # the search and join the elites: a round never loses what the last one found
        earlier = [a for n, a in cached_experts(entry, key, expert_seed, valid) if n != name]
        found = earlier
        if search or (expert_folder(entry.path) / name).exists():
            found = [cached(entry.path, "experts", name, lambda: search_expert(
                problem, measurer, seeds + earlier, expert_budget, expert_seed,
                start=expert_from, order=order), valid), *earlier]
        if found:
            found = np.stack(found)
            m = measurer.measure(found)
            state.offer(found, m.step_time_s, m.feasible)
    return state


class ProblemPool:
    """The problems of one split, built on first use (building runs every heuristic). The
    problems of one graph share its import and every array that does not depend on the
    cluster (gplace.gnn.shared_arrays)."""

    def __init__(self, cfg: PretrainConfig, split: str, search: bool = True):
        self.cfg, self.search = cfg, search  # search: a missing expert is searched on first use
        self.expert_budget = cfg.expert_budget if split == "train" else 0
        self.specs = [s for s in problem_specs(cfg, split)
                      if graph_ops(s[0]) <= cfg.max_graph_ops]
        self.names = [f"{e.name}@{c if isinstance(c, str) else f'random-{c}'}"
                      for e, c in self.specs]
        self.states: dict[int, ProblemState] = {}
        self.others: dict[int, ProblemState] = {}  # other_order's
        self.saved_elites: dict[str, list] = {}
        self.graphs: weakref.WeakValueDictionary[CorpusGraph, OpGraph] = \
            weakref.WeakValueDictionary()  # a graph no problem holds any more is freed
        self.arrays = ArrayPool()

    def __len__(self) -> int:
        return len(self.specs)

    def state(self, i: int) -> ProblemState:
        if i not in self.states:
            entry, c = self.specs[i]
            graph = self.graphs.get(entry)
            if graph is None:
                graph = self.graphs[entry] = load_corpus_graph(entry)
            st = build_state(entry, cluster_of(c), self.cfg.learn.elite_size,
                             self.expert_budget, self.cfg.seed, self.cfg.expert_from,
                             search=self.search, order=self.cfg.order, graph=graph)
            self.arrays.share(st)
            for t, p in self.saved_elites.pop(self.names[i], []):
                st.offer(np.asarray(p, np.int64)[None], np.array([t]), np.array([True]))
            self.states[i] = st
        return self.states[i]

    def best_heuristic(self, i: int) -> float:
        return float(self.state(i).ref_time_s or np.inf)

    def other_order(self, i: int) -> ProblemState:
        """Problem ``i`` with its list scheduler in the order that is not the policy's (a
        shallow copy: the same problem, features and elites as when it was made)."""
        if i not in self.others:
            st = self.state(i)
            self.others[i] = copy.copy(st)
            self.others[i].sched = self.arrays.fields(build_sched(st.problem,
                                                                  not st.sched.dispatch))
        return self.others[i]

    def elites(self) -> dict[str, list]:
        out = dict(self.saved_elites)
        for i, st in self.states.items():
            out[self.names[i]] = [(e.step_time_s, e.placement.tolist()) for e in st.elites]
        return out


@functools.lru_cache(maxsize=None)
def steps_bar(progress: bool) -> list:
    """Lightning's rich progress bar, described by steps: a run is bounded by --max-steps,
    and Lightning's default description reads "Epoch 0/-2" then. [] without progress or
    rich (Lightning's tqdm bar says "Epoch 0")."""
    if not progress:
        return []
    try:
        from lightning.pytorch.callbacks import RichProgressBar
        RichProgressBar()  # raises without rich
    except (ImportError, ModuleNotFoundError):
        return []

    class StepsBar(RichProgressBar):
        def _get_train_description(self, current_epoch: int) -> str:
            return "imitation steps"
    return [StepsBar()]


def graph_ops(entry: CorpusGraph) -> int:
    """The manifest's op count where it has one (importing every graph of a large corpus just
    to count its ops takes minutes on a fresh clone), else the imported graph's."""
    return entry.ops if entry.ops is not None else load_corpus_graph(entry).num_ops


class CorpusDataModule(L.LightningDataModule):
    """The training and validation pools. ``before_fit(rank, world_size, barrier)``, if given,
    runs on every process once they all exist (expert iteration searches the round's experts
    there, each rank its share) and the pools then only read the cached experts."""

    def __init__(self, cfg: PretrainConfig, before_fit=None):
        super().__init__()
        self.cfg, self.before_fit = cfg, before_fit
        self.train: ProblemPool | None = None
        self.val: ProblemPool | None = None

    def setup(self, stage: str | None = None) -> None:
        if self.train is None:
            if self.before_fit is not None:
                self.before_fit(self.trainer.global_rank, self.trainer.world_size,
                                self.trainer.strategy.barrier)
            self.train = ProblemPool(self.cfg, "train", search=self.before_fit is None)
            self.val = validation_pool(self.cfg, self.train)
            used = {e.path: e for e, _ in self.train.specs + self.val.specs}  # import, fit
            print(f"pretrain: corpus {self.cfg.corpus}: {describe(list(used.values()))}",
                  file=sys.stderr)
            if self.val is self.train:
                print("pretrain: the corpus has no validation split; validating on the "
                      "training problems (not a generalization figure)", file=sys.stderr)
            print(f"pretrain: {len(self.train)} training and {len(self.val)} validation "
                  "problems (built on first use)", file=sys.stderr)

    def train_dataloader(self) -> DataLoader:
        # Step numbers only: which problems a step takes is a function of (seed, step), so a
        # resumed run takes the same ones (PretrainModule.batch_of).
        return DataLoader(range(self.cfg.max_steps), batch_size=1, collate_fn=list)

    def val_dataloader(self) -> DataLoader:
        return DataLoader(range(len(self.val)), batch_size=max(len(self.val), 1), collate_fn=list)


class PretrainModule(L.LightningModule):
    def __init__(self, cfg: PretrainConfig):
        super().__init__()
        self.cfg = cfg
        self.save_hyperparameters({"config": _jsonable(asdict(cfg))})
        self.policy = GNNPolicy(cfg.hidden_channels, cfg.num_layers, cfg.type_channels,
                                head_hidden=cfg.head_hidden, order=cfg.order)
        if cfg.init_from is not None:
            start = GNNPolicy.load(cfg.init_from)[0]
            start.set_order(cfg.order)  # its weights, learned on in the config's order
            shape = ("hidden_channels", "num_layers", "type_channels")
            if [start.kwargs[k] for k in shape] != [getattr(cfg, k) for k in shape]:
                raise ConfigError(
                    f"{cfg.init_from}: a network of {start.kwargs['hidden_channels']} channels, "
                    f"{start.kwargs['num_layers']} layers and {start.kwargs['type_channels']} "
                    f"op-type channels; the config asks for {cfg.hidden_channels}, "
                    f"{cfg.num_layers} and {cfg.type_channels}")
            self.policy = start.train()
        self.automatic_optimization = False  # several PPO epochs per rollout

    def configure_optimizers(self):
        return torch.optim.Adam(self.policy.param_groups(self.cfg.learn.lr,
                                                         self.cfg.learn.w0_lr_scale))

    @property
    def step(self) -> int:
        return int(self.global_step) // self.cfg.learn.ppo_epochs

    def batch_of(self, step: int, n: int) -> list[int]:
        """The problems of training step ``step`` (this process's share under DDP)."""
        rng = np.random.default_rng([self.cfg.seed, step, self.global_rank])
        return rng.integers(0, n, self.cfg.problems_per_step).tolist()

    def training_step(self, batch, batch_idx: int):
        pool, cfg, step = self.trainer.datamodule.train, self.cfg.learn, self.step
        idx = self.batch_of(step, len(pool))
        states = [pool.state(i) if self.cfg.train_orders == "policy" or (step + j) % 2 == 0
                  else pool.other_order(i) for j, i in enumerate(idx)]
        seeds = [int(np.random.default_rng([self.cfg.seed, step, j, 7]).integers(2**31))
                 for j in range(len(states))]
        # samples 0: imitation only (the elite cross-entropy), no rollouts to measure
        batches = [sample(self.policy, s, cfg.samples, sd, temperature=cfg.temperature)
                   if cfg.samples else None
                   for s, sd in zip(states, seeds)]
        opt = self.optimizers()
        for _ in range(cfg.ppo_epochs):
            total = sum(loss(self.policy, s, b, cfg, sd)
                        for s, b, sd in zip(states, batches, seeds)) / len(states)
            opt.zero_grad()
            self.manual_backward(total)
            opt.step()
        logs = {"train/loss": float(total.detach())}
        if cfg.samples:
            logs["train/best_sample_vs_heuristic"] = geomean(
                [np.min(np.where(b.feasible, b.step_time_s, np.inf)) / pool.best_heuristic(i)
                 for b, i in zip(batches, idx)])
        self.log_dict(logs, prog_bar=True, batch_size=len(idx))

    def validation_step(self, batch: list[int], batch_idx: int):
        pool, weights = self.trainer.datamodule.val, policy_weights(self.policy)
        rows = validation_rows(self.policy, weights, pool, batch)
        # every rank's rows (one process: its own), so that each figure is one geometric mean
        gathered = self.all_gather(torch.tensor(rows, dtype=torch.float64))
        # the same value on every rank: syncing it only keeps Lightning from warning
        self.log_dict(validation_figures(gathered.reshape(-1, 3).cpu().numpy(),
                                         self.cfg.validate),
                      prog_bar=True, batch_size=len(batch), sync_dist=True)

    def on_save_checkpoint(self, checkpoint: dict) -> None:
        checkpoint["gplace_elites"] = self.trainer.datamodule.train.elites()

    def on_load_checkpoint(self, checkpoint: dict) -> None:
        self._saved_elites = checkpoint.get("gplace_elites", {})

    def on_train_start(self) -> None:
        saved = getattr(self, "_saved_elites", None)
        if saved:
            self.trainer.datamodule.train.saved_elites = dict(saved)

    def on_train_end(self) -> None:
        """Each process writes a checksum of its weights: under DDP they must all agree."""
        flat = torch.cat([p.detach().flatten().double() for p in self.policy.parameters()])
        log_dir = Path(self.trainer.default_root_dir)
        log_dir.mkdir(parents=True, exist_ok=True)
        (log_dir / f"weights_rank{self.global_rank}.txt").write_text(
            f"{float(flat.sum()):.12e} {float(flat.abs().sum()):.12e}\n")


def validation_pool(cfg: PretrainConfig, train: ProblemPool) -> ProblemPool:
    """The validation problems: the corpus' validation split, else ``train`` itself."""
    val = ProblemPool(cfg, "validation")
    return val if len(val) else train


def _jsonable(d):
    if isinstance(d, dict):
        return {k: _jsonable(v) for k, v in d.items()}
    return list(d) if isinstance(d, tuple) else d


def run_pretrain(cfg: PretrainConfig, out: Path, log_dir: Path, resume: bool = False,
                 devices: int = 1, num_nodes: int = 1, progress: bool = True,
                 log=sys.stderr, before_fit=None, callbacks=(), meta: dict | None = None) -> Path:
    """Trains, then writes the policy checkpoint ``out`` (format of gplace.gnn.policy).
    ``before_fit``: see CorpusDataModule; ``callbacks``: more Lightning callbacks."""
    L.seed_everything(cfg.seed, workers=True, verbose=False)
    torch.set_num_threads(cfg.threads)
    ckpt_dir = log_dir / "checkpoints"
    last = ckpt_dir / "last.ckpt"
    if resume and not last.exists():
        print(f"pretrain: --resume given but {last} does not exist; starting from scratch",
              file=log)
    # Manual optimization: Lightning counts optimizer steps, ppo_epochs of them per batch.
    per_batch = cfg.learn.ppo_epochs
    quiet_lightning_tips()
    best = L.pytorch.callbacks.ModelCheckpoint(dirpath=ckpt_dir, filename="best-{step}",
                                               monitor=VAL_METRICS[cfg.validate], mode="min",
                                               save_top_k=1)
    trainer = L.Trainer(
        max_steps=cfg.max_steps * per_batch, accelerator="cpu", devices=devices, num_nodes=num_nodes,
        # the experts' searches run between the processes' start and the first barrier
        strategy=(L.pytorch.strategies.DDPStrategy(timeout=timedelta(days=7))
                  if devices * num_nodes > 1 else "auto"),
        val_check_interval=cfg.val_every, check_val_every_n_epoch=None,
        num_sanity_val_steps=0, log_every_n_steps=1, enable_progress_bar=progress,
        logger=[L.pytorch.loggers.CSVLogger(log_dir, name="csv"),
                L.pytorch.loggers.TensorBoardLogger(log_dir, name="tb")],
        callbacks=averaging(cfg) + list(callbacks) + steps_bar(progress) + [best, ResumeCheckpoint(
            ckpt_dir, every=10 * per_batch, validation_every=cfg.val_every * per_batch)],
        deterministic=True, enable_model_summary=False, default_root_dir=str(log_dir))
    module, data = PretrainModule(cfg), CorpusDataModule(cfg, before_fit)
    with warnings.catch_warnings():
        # Lightning cannot see that our loader is resumable: a step's problems are a function
        # of (seed, step) (PretrainModule.batch_of), so a resumed run takes the same ones
        # (tests/gnn/test_pretrain.py::test_resume_is_the_run_it_resumes).
        warnings.filterwarnings("ignore", message=".*your dataloader is not resumable")
        # The checkpoints are meant to hold the weights after a step's update: a resumed run
        # continues with the next step.
        warnings.filterwarnings("ignore", message=".*no pre-optimization state was saved")
        # Lightning's own use of a torch API that torch deprecated (not ours to change).
        warnings.filterwarnings("ignore", message=r".*isinstance\(treespec, LeafSpec\)")
        # A resumed run writes its checkpoints into the folder it left them in, on purpose.
        warnings.filterwarnings("ignore", message=r"Checkpoint directory .* exists and is not "
                                                  r"empty")
        if resume and last.exists():  # a damaged file: one line saying so, not Lightning's
            read_checkpoint(last, "checkpoint to resume (delete it to restart the round)")
        trainer.fit(module, datamodule=data,
                    ckpt_path=str(last) if resume and last.exists() else None)
    if trainer.is_global_zero:
        val = trainer.callback_metrics.get(VAL_METRICS[cfg.validate])
        selected = select_best(module.policy, best)
        if selected is not None:
            val = selected[1]
        module.policy.save(out, meta={
            "selected": (f"the best validation checkpoint ({selected[0]})" if selected
                         else "the last step"),
            "config": _jsonable(asdict(cfg)), "steps": int(trainer.global_step) // per_batch,
            val_key(cfg): None if val is None else float(val),
            "train_problems": data.train.names, "val_problems": data.val.names,
            **(meta or {})})
    return out
