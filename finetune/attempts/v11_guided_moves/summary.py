import json, sys, numpy as np
rows = [r for f in sys.argv[1:] for r in json.load(open(f))]
cases = sorted({(r["graph"], r["cluster"], r["seed"]) for r in rows})
shares = sorted({r["share"] for r in rows})
get = {(r["graph"], r["cluster"], r["seed"], r["arm"], r["share"]): r["ratio"] for r in rows}
for s in shares:
    for arm in ("pretrained", "untrained"):
        v = [get[c + (arm, s)] for c in cases if c + (arm, s) in get]
        print(f"share {s}: {arm:<10} geomean {np.exp(np.mean(np.log(v))):.4f} over {len(v)}")
    pairs = [(get[c + ("pretrained", s)], get[c + ("untrained", s)]) for c in cases
             if c + ("pretrained", s) in get and c + ("untrained", s) in get]
    if pairs:
        r = np.array([a / b for a, b in pairs])
        print(f"   pretrained/untrained {np.exp(np.mean(np.log(r))):.4f}, better on {(r < 1).sum()} of {len(r)}")
