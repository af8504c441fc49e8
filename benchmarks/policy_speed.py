"""Sampling speed of the GNN policy: placements per second (forward pass + sampling + log-prob)
on graphs of about 1,000 and 10,000 ops, with colocation groups as units and coarsened to 64.

    .venv/bin/python benchmarks/policy_speed.py [--checkpoint CKPT] [--samples 256]
"""

from __future__ import annotations

import argparse
import statistics
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))


def graphs():
    """A ~1,000-op and a ~10,000-op training graph: the bundled example and Inception-V3."""
    import gplace
    root = Path(__file__).resolve().parents[1]
    out = [gplace.load_graph(root / "gplace" / "examples" / "small_resnet.pb")]
    big = root / "datasets" / "corpus" / "inception_v3_b32.pb"
    if big.exists():
        out.append(gplace.load_graph(big))
    else:
        print(f"({big} is not built: python -m datasets.build --only inception_v3_b32)")
    return out


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--checkpoint", default=None)
    parser.add_argument("--samples", type=int, default=256)
    parser.add_argument("--repeats", type=int, default=5)
    args = parser.parse_args()
    import torch
    torch.set_num_threads(1)
    from gplace import post
    from gplace.cluster import load_cluster
    from gplace.features import problem_features
    from gplace.gnn_placer import load
    from gplace.policy import FeatureTensors, GNNPolicy, sample
    from gplace.problem import CoarsenConfig, PlacementProblem
    policy = load(args.checkpoint).policy if args.checkpoint or Path(
        "gplace/checkpoints/policy.pt").exists() else GNNPolicy()
    for graph in graphs():
        for units in (None, 64):
            p = PlacementProblem.build(graph, load_cluster("post-4gpu"), coarsen=CoarsenConfig(units))
            t0 = time.perf_counter()
            f = FeatureTensors.from_numpy(problem_features(p))
            feat_s = time.perf_counter() - t0
            times = []
            gen = torch.Generator().manual_seed(0)
            for _ in range(args.repeats):
                t0 = time.perf_counter()
                with torch.no_grad():
                    logits = policy(f)
                    s = sample(logits, args.samples, gen)
                    post.placement_logp(logits.double(), s)
                times.append(time.perf_counter() - t0)
            med = statistics.median(times)
            print(f"{graph.meta['name']}: {graph.num_ops:,} ops, {p.num_units:,} units: "
                  f"{args.samples / med:,.0f} placements/s ({med * 1e3:.1f} ms for "
                  f"{args.samples} with log-probs; features {feat_s * 1e3:.0f} ms once)")


if __name__ == "__main__":
    main()
