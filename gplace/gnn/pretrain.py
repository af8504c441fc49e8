"""Pretraining the GNN policy over a corpus with Post's objective (DESIGN.md, "Pretraining").

    gplace pretrain --corpus datasets/ --max-steps 300 --out policy.pt

A Lightning DataModule serves (graph, cluster) problems of the training split; each training
step takes a batch of them, samples K placements each from the policy, simulates them in one
batch per problem, and applies the objective of :mod:`gplace.learn` (rewards normalized per
problem). Validation: the zero-shot placement (most likely device per unit, no samples) of each
validation problem against the best heuristic. Lightning gives checkpoints, resume, CSV and
TensorBoard logs and DDP (``--devices``, ``--num-nodes``).
"""

from __future__ import annotations

import sys
import time
from dataclasses import asdict, dataclass, field
from pathlib import Path

import lightning as L
import numpy as np
import torch
from torch.utils.data import DataLoader, RandomSampler

from gplace.cluster import load_cluster
from gplace.corpus import CorpusGraph, describe, list_corpus, load_corpus_graph
from gplace.cost import CostModel
from gplace.learn import LearnConfig, ProblemState, loss, rollout
from gplace.placers import SimMeasurer, get_placer
from gplace.policy import GNNPolicy, greedy
from gplace.problem import CoarsenConfig, PlacementProblem
from gplace.profile import CostProfile

SEED_HEURISTICS = ("single", "heft", "m-etf", "m-sct", "m-topo")  # elites to start from


@dataclass(frozen=True)
class PretrainConfig:
    corpus: str = "datasets"
    clusters: tuple[str, ...] = ("post-2gpu", "post-4gpu", "hetero")  # hdp-8gpu, nvlink-8gpu
                                              # stay unseen for the generalization study
    units: int = 64                # coarsen every graph to at most this many units (DESIGN.md)
    problems_per_step: int = 4     # (graph, cluster) problems per training step
    max_steps: int = 300
    val_every: int = 50            # training steps between validations
    hidden_channels: int = 64
    num_layers: int = 3
    seed: int = 0
    max_graph_ops: int = 40_000    # skip larger graphs (simulation time per sample)
    threads: int = 1               # torch intra-op threads: the per-problem nets are tiny, and
                                   # more threads made steps slower on a busy 2-core machine
    learn: LearnConfig = field(default_factory=LearnConfig)


def build_state(entry: CorpusGraph, cluster_name: str, units: int, elite_size: int) -> ProblemState:
    """A problem with its elite set seeded by the heuristics (which spend no samples)."""
    graph = load_corpus_graph(entry)
    model = CostModel()
    if entry.profile is not None:
        model.add_profile(CostProfile.load(entry.profile))
    problem = PlacementProblem.build(graph, load_cluster(cluster_name), model,
                                     CoarsenConfig(max_units=units))
    measurer = SimMeasurer(problem)
    seeds = [get_placer(h).place(problem, measurer, 0).placement for h in SEED_HEURISTICS]
    return ProblemState(problem, measurer, seeds, elite_size=elite_size)


class ProblemPool:
    """Every (graph, cluster) problem of one split, built once."""

    def __init__(self, cfg: PretrainConfig, split: str, log=sys.stderr):
        entries = [e for e in list_corpus(cfg.corpus) if e.split == split]
        self.states: list[ProblemState] = []
        self.names: list[str] = []
        start = time.perf_counter()
        for i, entry in enumerate(entries):
            for c in cfg.clusters:
                state = build_state(entry, c, cfg.units, cfg.learn.elite_size)
                if state.problem.graph.num_ops > cfg.max_graph_ops:
                    continue
                self.states.append(state)
                self.names.append(f"{entry.name}@{c}")
            print(f"pretrain: {split} problems {i + 1}/{len(entries)} graphs "
                  f"({time.perf_counter() - start:.0f} s)", file=log, flush=True)
        self.best_heuristic = np.array([s.elites[0][0] if s.elites else np.inf
                                        for s in self.states])


class CorpusDataModule(L.LightningDataModule):
    def __init__(self, cfg: PretrainConfig):
        super().__init__()
        self.cfg = cfg
        self.train: ProblemPool | None = None
        self.val: ProblemPool | None = None

    def setup(self, stage: str | None = None) -> None:
        if self.train is None:
            entries = list_corpus(self.cfg.corpus)
            print(f"pretrain: corpus {self.cfg.corpus}: {describe(entries)}", file=sys.stderr)
            self.train = ProblemPool(self.cfg, "train")
            self.val = ProblemPool(self.cfg, "validation")
            if not self.val.states:
                print("pretrain: the corpus has no validation split; validating on the "
                      "training problems (not a generalization figure)", file=sys.stderr)
                self.val = self.train

    def train_dataloader(self) -> DataLoader:
        # Indices only: the problems live in the pool. One epoch covers every step (problems
        # drawn with replacement), so validation runs every val_every steps; under DDP
        # Lightning wraps the sampler so that each process draws its own share.
        n = len(self.train.states)
        sampler = RandomSampler(range(n), replacement=True,
                                num_samples=self.cfg.max_steps * self.cfg.problems_per_step,
                                generator=torch.Generator().manual_seed(self.cfg.seed))
        return DataLoader(range(n), batch_size=self.cfg.problems_per_step, sampler=sampler,
                          collate_fn=list)

    def val_dataloader(self) -> DataLoader:
        return DataLoader(range(len(self.val.states)), batch_size=max(len(self.val.states), 1),
                          collate_fn=list)


class PretrainModule(L.LightningModule):
    def __init__(self, cfg: PretrainConfig):
        super().__init__()
        self.cfg = cfg
        self.save_hyperparameters({"config": _jsonable(asdict(cfg))})
        self.policy = GNNPolicy(cfg.hidden_channels, cfg.num_layers)
        self.automatic_optimization = False  # several PPO epochs per rollout
        self.generator = torch.Generator().manual_seed(cfg.seed)

    def configure_optimizers(self):
        return torch.optim.Adam(self.policy.parameters(), lr=self.cfg.learn.lr)

    def training_step(self, batch: list[int], batch_idx: int):
        pool, cfg = self.trainer.datamodule.train, self.cfg.learn
        states = [pool.states[i] for i in batch]
        rollouts = [rollout(self.policy, s, cfg.samples, self.generator) for s in states]
        opt = self.optimizers()
        for _ in range(cfg.ppo_epochs):
            total = sum(loss(self.policy, s, r, cfg) for s, r in zip(states, rollouts)) / len(states)
            opt.zero_grad()
            self.manual_backward(total)
            opt.step()
        ratio = np.mean([np.min(np.where(r.feasible, r.step_time_s, np.inf)) / pool.best_heuristic[i]
                         for r, i in zip(rollouts, batch)])
        self.log_dict({"train/loss": float(total.detach()), "train/best_sample_vs_heuristic": float(ratio)},
                      prog_bar=True, batch_size=len(batch))

    def validation_step(self, batch: list[int], batch_idx: int):
        pool = self.trainer.datamodule.val
        ratios = [zero_shot_time(self.policy, pool.states[i]) / pool.best_heuristic[i] for i in batch]
        self.log("val/zero_shot_vs_heuristic", float(np.mean(ratios)), prog_bar=True,
                 batch_size=len(batch), sync_dist=True)


    def on_train_end(self) -> None:
        """Each process writes a checksum of its weights: under DDP they must all agree."""
        flat = torch.cat([p.detach().flatten().double() for p in self.policy.parameters()])
        log_dir = Path(self.trainer.default_root_dir)
        log_dir.mkdir(parents=True, exist_ok=True)
        (log_dir / f"weights_rank{self.global_rank}.txt").write_text(
            f"{float(flat.sum()):.12e} {float(flat.abs().sum()):.12e}\n")


def zero_shot_time(policy: GNNPolicy, state: ProblemState) -> float:
    """Step time of the most likely placement (inf if it does not fit)."""
    with torch.no_grad():
        placement = greedy(policy(state.features))
    m = state.measurer.measure(placement[None])
    return float(m.step_time_s[0]) if m.feasible[0] else np.inf


def _jsonable(d):
    if isinstance(d, dict):
        return {k: _jsonable(v) for k, v in d.items()}
    return list(d) if isinstance(d, tuple) else d


def run_pretrain(cfg: PretrainConfig, out: Path, log_dir: Path, resume: bool = False,
                 devices: int = 1, num_nodes: int = 1, progress: bool = True) -> Path:
    """Trains, then writes the policy checkpoint ``out`` (format of gplace.policy)."""
    L.seed_everything(cfg.seed, workers=True, verbose=False)
    torch.set_num_threads(cfg.threads)
    ckpt_dir = log_dir / "checkpoints"
    last = ckpt_dir / "last.ckpt"
    # Manual optimization: Lightning counts optimizer steps, ppo_epochs of them per batch.
    per_batch = cfg.learn.ppo_epochs
    trainer = L.Trainer(
        max_steps=cfg.max_steps * per_batch, accelerator="cpu", devices=devices, num_nodes=num_nodes,
        strategy="ddp" if devices * num_nodes > 1 else "auto",
        val_check_interval=cfg.val_every, check_val_every_n_epoch=None,
        num_sanity_val_steps=0, log_every_n_steps=1, enable_progress_bar=progress,
        logger=[L.pytorch.loggers.CSVLogger(log_dir, name="csv"),
                L.pytorch.loggers.TensorBoardLogger(log_dir, name="tb")],
        callbacks=[L.pytorch.callbacks.ModelCheckpoint(dirpath=ckpt_dir, save_last=True,
                                                       every_n_train_steps=10 * per_batch)],
        deterministic=True, enable_model_summary=False, default_root_dir=str(log_dir))
    module, data = PretrainModule(cfg), CorpusDataModule(cfg)
    start = time.perf_counter()
    trainer.fit(module, datamodule=data, ckpt_path=str(last) if resume and last.exists() else None)
    if trainer.is_global_zero:
        val = trainer.callback_metrics.get("val/zero_shot_vs_heuristic")
        module.policy.save(out, meta={
            "config": _jsonable(asdict(cfg)), "steps": int(trainer.global_step) // per_batch,
            "seconds": round(time.perf_counter() - start, 1),
            "val_zero_shot_vs_heuristic": None if val is None else float(val),
            "train_problems": data.train.names, "val_problems": data.val.names})
    return out
