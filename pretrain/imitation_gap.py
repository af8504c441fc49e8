"""The gap between a policy and the experts it imitates, on training problems sampled at random
(seed 1): per problem, the expert's and the policy's greedy step time over the best heuristic,
the cross-entropy and accuracy of the policy's decisions along the expert's schedule (also
weighted by the unit's work), and decisions where a twin device had identical features.
Round 2's experts (budget 100 from pretrain/round1.pt) must be in the corpus cache.

    .venv/bin/python -m pretrain.imitation_gap pretrain/round2.pt 12
"""
import sys, time, numpy as np, torch
from gplace.gnn.config import PretrainConfig
from gplace.gnn.pretrain import problem_specs, cluster_of, build_state
from gplace.gnn.policy import GNNPolicy
from gplace.gnn.learn import decision_logp, greedy, tempered
from gplace.gnn.schedule import rollout, GREEDY
from gplace.gnn.features import twin_groups
torch.set_num_threads(1)
cfg = PretrainConfig(corpus='pretrain/corpus84')
specs = [s for s in problem_specs(cfg, 'train')]
rng = np.random.default_rng(1)
idx = rng.choice(len(specs), int(sys.argv[2]) if len(sys.argv) > 2 else 12, replace=False)
pol = GNNPolicy.load(sys.argv[1])[0] if sys.argv[1] != 'untrained' else GNNPolicy()
rows = []
for i in idx:
    e, c = specs[i]
    if e.path.stat().st_size > 40e6: continue
    st = build_state(e, cluster_of(c), 1, 100, 0, 'pretrain/round1.pt')
    el = st.elites[0]
    ref = st.ref_time_s
    with torch.no_grad():
        sc = pol(st.features)
        lp, all_lp = decision_logp(sc, el.rollout)
    mask = torch.as_tensor(el.rollout.mask[0])
    choice = mask.sum(-1) > 1
    nll = -lp[0][choice]
    acc = (all_lp[0].argmax(-1) == torch.as_tensor(el.placement))[choice].float()
    work = torch.as_tensor(st.sched.unit_cost.min(1))[choice]
    wshare = work / work.sum()
    g = greedy(pol, st)
    tg = st.measurer.measure(g[None]).step_time_s[0]
    # symmetric ties: decisions where two allowed devices of one twin group have identical phi
    tw = twin_groups(st.problem)
    phi = el.rollout.phi[0]
    ties = 0
    for u in np.flatnonzero(choice.numpy()):
        dv = el.placement[u]
        same = [d for d in range(len(tw)) if d != dv and tw[d] == tw[dv] and np.array_equal(phi[u, d], phi[u, dv])]
        ties += bool(same)
    rows.append((e.name, str(c), st.problem.num_units, int(choice.sum()), el.step_time_s/ref, tg/ref,
                 float(nll.mean()), float((nll*wshare).sum()), float(acc.mean()), float((acc*wshare).sum()), ties))
    print("%-28s %-16s units %5d choice %5d expert %.3f greedy %.3f nll %.2f wnll %.2f acc %.2f wacc %.2f ties %d" % rows[-1], flush=True)
r = np.array([x[4:] for x in rows], float)
print("geomean expert %.3f greedy %.3f; mean nll %.2f wnll %.2f acc %.2f wacc %.2f" % (
    np.exp(np.log(r[:,0]).mean()), np.exp(np.log(r[:,1]).mean()), *r[:,2:6].mean(0)))
