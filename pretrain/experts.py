"""Builds the expert placements of every training problem before pretraining, in parallel
processes (pretraining would otherwise build each on the problem's first use, one at a time).

    .venv/bin/python -m pretrain.experts --budget 300 --jobs 2 [--problems N] [--expert-from CKPT]

Takes the same corpus, clusters and seed as `gplace pretrain`'s defaults; the experts land in
the corpus' cache (datasets/.gplace-cache/experts), where `gplace pretrain --expert-budget`
finds them. Prints each problem's expert against its best heuristic (simulated: estimates).

The cache is not in git. `--save FILE` packs every cached expert of the corpus' graphs into one
compressed archive (pretrain/experts_round7.npz is round 7's), and `--restore FILE` writes an
archive's experts back into the cache, byte for byte, so that a fresh clone imitates the same
targets without the searches:

    .venv/bin/python -m pretrain.experts --corpus pretrain/corpus139 \
        --restore pretrain/experts_round7.npz
"""

from __future__ import annotations

import argparse
import sys
import time
import zipfile
from concurrent.futures import ProcessPoolExecutor, as_completed
from dataclasses import replace
from pathlib import Path

import numpy as np

from gplace.gnn.config import PretrainConfig
from gplace.gnn.experts import EXPERT_FILE


_POOLS: dict = {}  # per worker process: listing the problems loads every graph once


def one(cfg: PretrainConfig, i: int) -> tuple[str, float, float, float]:
    import torch
    torch.set_num_threads(1)
    from gplace.gnn.pretrain import ProblemPool
    if cfg not in _POOLS:
        _POOLS[cfg] = ProblemPool(cfg, "train")
    pool = _POOLS[cfg]
    start = time.perf_counter()
    st = pool.state(i)
    return pool.names[i], st.best_time_s, pool.best_heuristic(i), time.perf_counter() - start


def _folders(corpus: str) -> dict[str, Path]:
    """Each corpus graph's expert cache folder."""
    from gplace.gnn.corpus import list_corpus
    from gplace.gnn.experts import expert_folder
    return {e.name: expert_folder(e.path) for e in list_corpus(corpus)}


def save_archive(corpus: str, path: str | Path) -> int:
    """Packs every cached expert of the corpus' graphs into one compressed ``.npz`` (devices
    as uint8), written atomically; returns how many."""
    from gplace.io import atomic_write
    arrays = {}
    for name, folder in _folders(corpus).items():
        for f in sorted(folder.glob(f"{name}-*.npy")):
            m = EXPERT_FILE.match(f.name)
            if m and m.group(1) == name:
                a = np.load(f)
                arrays[f.name] = a.astype(np.uint8) if a.min() >= 0 and a.max() < 256 else a
    atomic_write(path, lambda f: np.savez_compressed(f, **arrays), binary=True)
    return len(arrays)


def restore_archive(corpus: str, path: str | Path) -> tuple[int, int, int]:
    """Writes the archive's experts into the corpus' cache as int64 ``.npy`` files (the bytes
    a search writes), each atomically; returns (written, already there, not of this corpus).
    A cached file is never overwritten."""
    from gplace.io import atomic_write
    folders = _folders(corpus)
    written = present = foreign = 0
    try:
        archive = np.load(path)
    except (OSError, ValueError, zipfile.BadZipFile) as e:
        raise SystemExit(f"pretrain.experts: {path}: not an experts archive ({e})") from None
    with archive:
        for key in archive.files:
            m = EXPERT_FILE.match(key)
            if m is None or m.group(1) not in folders:
                foreign += 1
                continue
            target = folders[m.group(1)] / key
            if target.exists():
                present += 1
                continue
            a = archive[key].astype(np.int64)
            atomic_write(target, lambda f: np.save(f, a), binary=True)
            written += 1
    return written, present, foreign


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--budget", type=int, default=300)
    ap.add_argument("--jobs", type=int, default=2)
    ap.add_argument("--problems", type=int, default=None, help="only the first N problems")
    ap.add_argument("--corpus", default=PretrainConfig.corpus)
    ap.add_argument("--expert-from", default=None, metavar="CKPT",
                    help="start the searches from this policy (the next round)")
    io = ap.add_mutually_exclusive_group()
    io.add_argument("--save", metavar="FILE", help="pack the cached experts into FILE (.npz)")
    io.add_argument("--restore", metavar="FILE", help="write FILE's experts into the cache")
    args = ap.parse_args(argv)
    if args.save:
        print(f"wrote {save_archive(args.corpus, args.save)} experts to {args.save}")
        return 0
    if args.restore:
        w, p, f = restore_archive(args.corpus, args.restore)
        print(f"restored {w} experts ({p} already cached, {f} not of {args.corpus}'s graphs)")
        return 0
    cfg = replace(PretrainConfig(), corpus=args.corpus, expert_budget=args.budget,
                  expert_from=args.expert_from)
    from gplace.gnn.pretrain import ProblemPool
    n = len(ProblemPool(cfg, "train"))
    todo = range(n if args.problems is None else min(n, args.problems))
    ratios = []
    with ProcessPoolExecutor(args.jobs) as ex:
        futures = [ex.submit(one, cfg, i) for i in todo]
        for k, f in enumerate(as_completed(futures), 1):
            name, t, h, s = f.result()
            ratios.append(t / h)
            print(f"[{k}/{len(todo)}] {name}: expert {t * 1e3:.2f} ms = {t / h:.3f}x the best "
                  f"heuristic ({s:.0f} s)", flush=True)
    print(f"experts / best heuristic: geomean {np.exp(np.mean(np.log(ratios))):.3f} over "
          f"{len(ratios)} problems (estimated step times)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
