"""Per checkpoint: ft 100 / best heuristic and zero-shot (geomean of the 9 validation cases,
each the geometric mean of seeds 0-3), against v14's untrained `base` arm. Usage:
    python finetune/attempts/v15_pretraining_variants/summary.py OUT.json"""
import collections, json, sys
import numpy as np
rows = json.load(open(sys.argv[1]))
v14 = json.load(open("finetune/attempts/v14_search_mix/validation.json"))
unt = {(r["graph"], r["cluster"], r["seed"]): r["ratio"] for r in v14
       if r["variant"] == "base" and r["arm"] == "untrained"}
by = collections.defaultdict(dict)
for r in rows:
    by[r["checkpoint"]][(r["graph"], r["cluster"], r["seed"])] = r
g = lambda x: float(np.exp(np.mean(np.log(x))))
print(f"{'checkpoint':>44} {'runs':>4} {'zero-shot':>9} {'ft 100':>7} {'untrained':>9} "
      f"{'pre/unt':>7}  better")
for c, runs in by.items():
    keys = sorted(k for k in runs if k in unt)
    cases = sorted({k[:2] for k in keys})
    case = lambda f: g([g([f(k) for k in keys if k[:2] == cs]) for cs in cases])
    zs = case(lambda k: runs[k]["zero_shot"])
    ft = case(lambda k: runs[k]["ratio"])
    un = case(lambda k: unt[k])
    wins = sum(runs[k]["ratio"] < unt[k] for k in keys)
    print(f"{c:>44} {len(keys):>4} {zs:>9.4f} {ft:>7.4f} {un:>9.4f} {ft / un:>7.4f}  "
          f"{wins} of {len(keys)}")
