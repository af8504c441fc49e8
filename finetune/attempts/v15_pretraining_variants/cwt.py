"""v15 run cwt: `gplace pretrain ... --ce-work 1` with the decision weights counting each group's
traffic too (bytes in and out at 10 GB/s) besides its work; not in the library (it lost).
    .venv/bin/python finetune/attempts/v15_pretraining_variants/cwt.py pretrain <round 2c's options>"""
import sys
import numpy as np, torch
import gplace.gnn.learn as learn

def decision_weights(state, work_share):
    a = state.sched
    n = a.num_units
    traffic = np.add.reduceat(a.adj_bytes, a.adj_ptr[:-1]) if len(a.adj_bytes) else np.zeros(n)
    traffic = np.where(np.diff(a.adj_ptr) > 0, traffic, 0.0)
    work = a.unit_cost.min(1) + traffic / 1e10
    even = np.full(n, 1.0 / n)
    by_work = work / work.sum() if work.sum() > 0 else even
    return torch.as_tensor((1.0 - work_share) * even + work_share * by_work)

learn.decision_weights = decision_weights
from gplace.cli import main
sys.exit(main(sys.argv[1:]))
