"""Paired comparison of two sets of runs (e.g. lr 3e-3 against the default 1e-2): per arm and
anchor, geomean of ratio(B) / ratio(A) over the runs both hold (same case, seed, arm, anchor,
start mode), runs better / worse, and each set's pretrained / untrained over those runs.
Usage: compare.py "A1.json,A2.json" "B1.json,..." """
import json, sys
import numpy as np

load = lambda arg: {(r["graph"], r["cluster"], r["seed"], r["arm"], r["anchor"], r["starts"]):
                    r["ratio"] for f in arg.split(",") for r in json.load(open(f))}
a, b = load(sys.argv[1]), load(sys.argv[2])
gm = lambda v: float(np.exp(np.mean(np.log(v))))
common = sorted(set(a) & set(b))
for anchor in sorted({k[4] for k in common}):
    for mode in sorted({k[5] for k in common}):
        for arm in ("pretrained", "untrained"):
            ks = [k for k in common if k[3:] == (arm, anchor, mode)]
            x = np.array([b[k] / a[k] for k in ks])
            print(f"anchor {anchor:g} starts {mode} {arm:<10}: B/A {gm(x):.4f}, better on "
                  f"{int((x < 1).sum())}, worse on {int((x > 1).sum())} of {len(x)} "
                  f"(A {gm([a[k] for k in ks]):.4f}, B {gm([b[k] for k in ks]):.4f})")
        pk = [k for k in common if k[3:] == ("pretrained", anchor, mode)
              and k[:3] + ("untrained", anchor, mode) in b and k[:3] + ("untrained", anchor, mode) in a]
        for name, d in (("A", a), ("B", b)):
            r = np.array([d[k] / d[k[:3] + ("untrained", anchor, mode)] for k in pk])
            print(f"    {name}: pretrained/untrained {gm(r):.4f}, pretrained better on "
                  f"{int((r < 1).sum())} of {len(r)}")
