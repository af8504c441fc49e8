"""Fine-tuning's local moves, two changes: the moved unit drawn partly by its work instead of
uniformly, and moves made by the policy itself (a rollout that follows the best placement
except at a few units, where it samples another device at the state the schedule has reached,
gplace.gnn.schedule MIXED_SAMPLE). The 9 validation cases, ft 100 without heuristic starts,
pretrained and untrained. All simulated. Usage (from the repository root):
    python finetune/attempts/v17_guided_moves/study.py VARIANTS SEEDS OUT.json [CKPT]"""
import dataclasses, json, sys, time
from pathlib import Path
import numpy as np
sys.path.insert(0, ".")
import torch
torch.set_num_threads(1)
from finetune.study import build_case, fresh_network, CLUSTERS
from gplace.gnn.config import FinetuneConfig
from gplace.gnn.learn import decision_logp, tempered
from gplace.gnn.placer import GNNPlacer, _heaviest_neighbour, load_policy
from gplace.gnn.schedule import MIXED_SAMPLE, rollout
from gplace.gnn.corpus import list_corpus

VARIANTS = {  # name: (work share of the unit draw, guided share of the local samples, moves)
    "base": (0.0, 0.0, 0),
    "work0.5": (0.5, 0.0, 0),
    "g0.5m4": (0.0, 0.5, 4),
    "g1m4": (0.0, 1.0, 4),
    "g0.5m16": (0.0, 0.5, 16),
    "g0.5m1": (0.0, 0.5, 1),
    "g1m1": (0.0, 1.0, 1),
    "g1m2": (0.0, 1.0, 2),
    "g1m8": (0.0, 1.0, 8),
    "g1m4all": (0.0, 1.0, 4, {"local_start": 1.0, "local_fraction": 1.0}),
    "g1m4l95": (0.0, 1.0, 4, {"local_start": 0.5, "local_fraction": 0.95}),
    "g1m4u": (0.0, 1.0, 4, {"_gwork": 0.0}),
    "g1m4h": (0.0, 1.0, 4, {"_gwork": 1.0}),
}


class Variant(GNNPlacer):
    def __init__(self, work, guided, moves, fields=None, **kw):
        fields = dict(fields or {})
        self.gwork = fields.pop("_gwork", 0.5)  # work share of the guided deviations' draw
        super().__init__(config=dataclasses.replace(FinetuneConfig(), **fields), **kw)
        self.work, self.guided, self.moves = work, guided, moves

    def _unit_probs(self, state, share):
        n = state.sched.num_units
        work = state.sched.unit_cost.min(1)
        by_work = work / work.sum() if work.sum() > 0 else np.full(n, 1.0 / n)
        return share * by_work + (1 - share) / n

    def _local_moves(self, policy, state, tracker, count, rng):
        n_g = int(round(count * self.guided))
        if count - n_g:
            self._unit_moves(policy, state, tracker, count - n_g, rng)
        if n_g and tracker.left > 0:
            self._guided(policy, state, tracker, n_g, rng)

    def _guided(self, policy, state, tracker, count, rng):
        best = state.elites[0]
        with torch.no_grad():
            s, w = tempered(policy(state.features), self.config.learn.temperature).numpy()
        follow = 1.0 - np.minimum(1.0, self.moves * self._unit_probs(state, self.gwork))
        ro = rollout(state.sched, s, w, MIXED_SAMPLE, seed=int(rng.integers(2**31)),
                     forced=np.repeat(best.placement[None], count, axis=0), follow=follow)
        m = tracker.evaluate(ro.placements)
        n = len(m.step_time_s)
        state.offer(ro.placements[:n], m.step_time_s, m.feasible, m.low_s, m.high_s)

    def _unit_moves(self, policy, state, tracker, count, rng):
        best = state.elites[0]
        with torch.no_grad():
            scores = tempered(policy(state.features), self.config.learn.temperature)
            _, logp = decision_logp(scores, best.rollout)
        probs = logp[0].exp().numpy()
        mix = self.config.policy_mix
        q = mix * probs + (1 - mix) / probs.shape[1]
        heaviest = _heaviest_neighbour(state)
        cands = np.repeat(best.placement[None], count, axis=0)
        units = (rng.integers(0, best.placement.shape[0], count) if self.work == 0 else
                 rng.choice(best.placement.shape[0], count, p=self._unit_probs(state, self.work)))
        for row, u in enumerate(units):
            w = q[u].copy()
            w[best.placement[u]] = 0.0
            if w.sum() <= 0:
                continue
            moved = [int(u)]
            if rng.random() < self.config.chain_moves:
                for _ in range(rng.geometric(0.5) - 1):
                    moved.append(int(heaviest[moved[-1]]))
            cands[row, moved] = rng.choice(w.shape[0], p=w / w.sum())
        m = tracker.evaluate(cands)
        state.offer(cands[: len(m.step_time_s)], m.step_time_s, m.feasible, m.low_s, m.high_s)


names = sys.argv[1].split(",")
seeds = [int(x) for x in sys.argv[2].split(",")]
out = Path(sys.argv[3])
policy = load_policy(sys.argv[4] if len(sys.argv) > 4 else None)[0]
graphs = ("xception_b8_96", "gru_lm_2l_h512", "wide_deep_8x100k")
done = json.loads(out.read_text()) if out.exists() else []
have = {(r["graph"], r["cluster"], r["seed"], r["arm"], r["variant"]) for r in done}
for entry in [e for e in list_corpus("datasets") if e.split == "validation" and e.name in graphs]:
    for cluster in CLUSTERS:
        problem, m, heur, bound = build_case(entry, cluster)
        best_h = min(r.step_time_s for r in heur.values() if r.feasible)
        for seed in seeds:
            for arm in ("pretrained", "untrained"):
                net = policy if arm == "pretrained" else fresh_network(policy, seed)
                for name in names:
                    key = (entry.name, cluster, seed, arm, name)
                    if key in have:
                        continue
                    t0 = time.perf_counter()
                    r = Variant(*VARIANTS[name], seed=seed, policy=net).place(problem, m, 100)
                    curve = np.minimum(r.history.best_so_far(), r.info["start_step_time_s"])
                    done.append(dict(zip(("graph", "cluster", "seed", "arm", "variant"), key),
                                     ratio=float(curve[-1] / best_h),
                                     curve=[float(c / best_h) for c in curve],
                                     s=time.perf_counter() - t0))
                    out.write_text(json.dumps(done, indent=0))
                    print({k: v for k, v in done[-1].items() if k != "curve"}, flush=True)
