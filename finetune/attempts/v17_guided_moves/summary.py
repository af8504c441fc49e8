"""Per variant: geomean over the validation cases of the per-case geometric mean over seeds of
ft N / best heuristic, both arms, their ratio and how often pretrained wins. Usage:
    python finetune/attempts/v17_guided_moves/summary.py OUT.json [N]"""
import collections, json, sys
import numpy as np
rows = json.load(open(sys.argv[1]))
n = int(sys.argv[2]) if len(sys.argv) > 2 else None
by = collections.defaultdict(list)
for r in rows:
    v = r["curve"][n - 1] if n else r["ratio"]
    by[(r["variant"], r["arm"], r["graph"], r["cluster"])].append((r["seed"], v))
variants = list(dict.fromkeys(r["variant"] for r in rows))
print(f"{'variant':>10} {'runs':>5} {'pretrained':>11} {'untrained':>10} {'pre/unt':>8}  better")
for v in variants:
    cases = sorted({k[2:] for k in by if k[0] == v})
    pre, unt, wins, runs = [], [], 0, 0
    for c in cases:
        a, b = dict(by[(v, "pretrained", *c)]), dict(by[(v, "untrained", *c)])
        seeds = sorted(set(a) & set(b))
        if not seeds:
            continue
        pre.append(np.mean(np.log([a[s] for s in seeds])))
        unt.append(np.mean(np.log([b[s] for s in seeds])))
        wins += sum(a[s] < b[s] for s in seeds)
        runs += len(seeds)
    g = lambda x: float(np.exp(np.mean(x)))
    print(f"{v:>10} {runs:>5} {g(pre):>11.4f} {g(unt):>10.4f} {g(pre) / g(unt):>8.4f}  "
          f"{wins} of {runs}")
