"""Geomean ratio over the best heuristic per arm and temperature, pretrained / untrained, and
the cases pretrained is better on. Usage: python summary.py validation.json"""
import collections, json, math, sys
rows = json.load(open(sys.argv[1]))
gm = lambda xs: math.exp(sum(math.log(x) for x in xs) / len(xs))  # noqa: E731
by = collections.defaultdict(dict)
for r in rows:
    by[r["temperature"]][(r["graph"], r["cluster"], r["seed"], r["arm"])] = r["ratio"]
print(f"{'T':>5} {'runs':>5} {'pretrained':>11} {'untrained':>10} {'pre/unt':>8}  better")
for t in sorted(by):
    d = by[t]
    keys = sorted({k[:3] for k in d if (*k[:3], "untrained") in d and (*k[:3], "pretrained") in d})
    p = [d[(*k, "pretrained")] for k in keys]
    u = [d[(*k, "untrained")] for k in keys]
    better = sum(a < b for a, b in zip(p, u))
    print(f"{t:>5g} {len(keys):>5} {gm(p):>11.4f} {gm(u):>10.4f} {gm(p) / gm(u):>8.4f}  "
          f"{better} of {len(keys)}")
