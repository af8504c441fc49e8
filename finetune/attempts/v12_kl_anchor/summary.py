"""Tables of the v12 runs: per start mode (h: heuristic starts; none: without) and anchor,
geomean ratio to the best heuristic per arm, pretrained / untrained (geomean of the per-run
ratios) and the count of runs where pretrained is strictly better; per seed and overall.
Usage: summary.py RESULTS.json [...]"""
import json, sys
import numpy as np

rows = [r for f in sys.argv[1:] for r in json.load(open(f))]
get = {(r["graph"], r["cluster"], r["seed"], r["arm"], r["anchor"], r["starts"]): r["ratio"]
       for r in rows}
cases = sorted({(r["graph"], r["cluster"]) for r in rows})
seeds = sorted({r["seed"] for r in rows})
gm = lambda v: float(np.exp(np.mean(np.log(v))))
se = lambda x: np.std(x, ddof=1) / np.sqrt(len(x)) if len(x) > 1 else float("nan")


def line(mode, anchor, seed_set, label):
    keys = [(g, c, s) for g, c in cases for s in seed_set]
    have = [k for k in keys if all(k + (a, anchor, mode) in get for a in ("pretrained", "untrained"))]
    if not have:
        return None
    pre = np.array([get[k + ("pretrained", anchor, mode)] for k in have])
    unt = np.array([get[k + ("untrained", anchor, mode)] for k in have])
    r = pre / unt
    return (f"{mode:<5} {anchor:>6g} {label:<8} {len(have):>3}  {gm(pre):.4f}  {gm(unt):.4f}  "
            f"{gm(r):.4f}  {int((r < 1).sum()):>2} of {len(r):<2}")


print("starts anchor seeds      n  pretr.  untr.   pre/unt better")
for mode in ("h", "none"):
    for anchor in sorted({r["anchor"] for r in rows if r["starts"] == mode}):
        for s in seeds:
            out = line(mode, anchor, [s], f"seed {s}")
            if out:
                print(out)
        print(line(mode, anchor, seeds, "all"))
    print()

# paired against anchor 0 (same case, seed, arm, start mode): does the anchor move each arm?
print("vs anchor 0, paired runs: geomean ratio(anchor a) / ratio(anchor 0), runs better/worse;")
print("pre/unt: geomean over the seeds where both anchors ran, +- the standard error (log) of its per-seed")
print("values; paired by seed: the same for anchor a's per-seed log pre/unt minus anchor 0's")
for mode in ("h", "none"):
    for anchor in sorted({r["anchor"] for r in rows if r["starts"] == mode} - {0.0}):
        parts = []
        for arm in ("pretrained", "untrained"):
            ks = [(g, c, s) for g, c in cases for s in seeds
                  if (g, c, s, arm, anchor, mode) in get and (g, c, s, arm, 0.0, mode) in get]
            if not ks:
                continue
            r = np.array([get[k + (arm, anchor, mode)] / get[k + (arm, 0.0, mode)] for k in ks])
            parts.append(f"{arm} {gm(r):.4f} ({int((r < 1).sum())} better, "
                         f"{int((r > 1).sum())} worse of {len(r)})")
        both = [s for s in seeds if all((g, c, s, arm, a, mode) in get for g, c in cases
                                        for arm in ("pretrained", "untrained")
                                        for a in (0.0, anchor))]
        per_seed = {a: np.array([np.mean([np.log(get[(g, c, s, "pretrained", a, mode)]
                                                 / get[(g, c, s, "untrained", a, mode)])
                                          for g, c in cases]) for s in both])
                    for a in (0.0, anchor)}
        d = per_seed[anchor] - per_seed[0.0]
        print(f"{mode:<5} {anchor:>6g}  " + "; ".join(parts)
              + f"; pre/unt {np.exp(per_seed[anchor].mean()):.4f} +- {se(per_seed[anchor]):.4f}"
              f" (anchor 0: {np.exp(per_seed[0.0].mean()):.4f} +- {se(per_seed[0.0]):.4f};"
              f" {len(per_seed[anchor])} seeds)"
              + (f"; paired by seed: pre/unt x{np.exp(d.mean()):.4f} +- {se(d):.4f} (log),"
                 f" lower on {int((d < 0).sum())} of {len(d)} seeds" if len(d) else ""))
