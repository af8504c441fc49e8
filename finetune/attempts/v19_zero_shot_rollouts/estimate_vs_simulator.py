"""The list schedule's own makespan estimate against the simulator: 64 policy samples at the
fine-tuning temperature on one case; their spread, the rank correlation, and what the best by
estimate measures. Simulated. Usage:
    python finetune/attempts/v19_zero_shot_rollouts/estimate_vs_simulator.py GRAPH CLUSTER CKPT|untrained ..."""
import sys, time, numpy as np, torch
sys.path.insert(0, ".")
torch.set_num_threads(1)
from finetune.study import build_case
from gplace.gnn.learn import ProblemState, tempered
from gplace.gnn.schedule import rollout, SAMPLE, GREEDY
from gplace.gnn.policy import GNNPolicy
from gplace.gnn.corpus import list_corpus
spearmanr = lambda a, b: (np.corrcoef(np.argsort(np.argsort(a)), np.argsort(np.argsort(b)))[0, 1],)
ents = {e.name: e for e in list_corpus("datasets")}
g, c = sys.argv[1], sys.argv[2]
problem, m, heur, bound = build_case(ents[g], c)
bh = min(r.step_time_s for r in heur.values() if r.feasible)
st = ProblemState(problem, m)
for name in sys.argv[3:]:
    if name == "untrained": torch.manual_seed(0); net = GNNPolicy()
    else: net = GNNPolicy.load(name)[0]
    with torch.no_grad(): sc = tempered(net(st.features), 0.25).numpy()
    gr = rollout(st.sched, *sc, GREEDY)
    t0 = time.perf_counter(); ro = rollout(st.sched, *sc, SAMPLE, count=64, seed=1); dt = time.perf_counter() - t0
    t1 = time.perf_counter(); mm = m.measure(ro.placements); dm = time.perf_counter() - t1
    mg = m.measure(gr.placements)
    t = mm.step_time_s / bh; e = ro.estimate_s / bh
    k = np.argsort(e)[:8]
    print(name.split('/')[-1], f"greedy sim {mg.step_time_s[0]/bh:.3f} est {gr.estimate_s[0]/bh:.3f} | 64 samples: rollout {dt:.2f}s sim {dm:.2f}s; sim min {t.min():.3f} med {np.median(t):.3f}; est min {e.min():.3f} med {np.median(e):.3f}; spearman {spearmanr(t, e)[0]:.2f}; best-by-est sim {t[k[0]]:.3f}, best of top8 by est {t[k].min():.3f}", flush=True)
