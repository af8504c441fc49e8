"""Speed of the learned list scheduler: placements per second (one forward pass of the GNN,
then the compiled rollouts with their decision features, then the per-decision log-probs) on
graphs of about 1,000 and 10,000 ops at full granularity (colocation groups), post-4gpu.

    .venv/bin/python benchmarks/policy_speed.py [--checkpoint CKPT] [--samples 64]
"""

from __future__ import annotations

import argparse
import statistics
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
ONE_ORDER_ROLLOUTS = 64  # zero-shot in one order, for comparison: the greedy and this many


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
    parser.add_argument("--samples", type=int, default=64)
    parser.add_argument("--repeats", type=int, default=5)
    args = parser.parse_args()
    import torch
    torch.set_num_threads(1)
    from gplace.cluster import load_cluster
    from gplace.gnn.config import FinetuneConfig
    from gplace.gnn.learn import ProblemState, decision_logp
    from gplace.gnn.placer import SHIPPED, GNNPlacer, load_policy
    from gplace.gnn.policy import GNNPolicy
    from gplace.gnn.schedule import GREEDY, SAMPLE, rollout
    from gplace.problem import PlacementProblem
    policy = (load_policy(args.checkpoint)[0] if args.checkpoint or SHIPPED.exists()
              else GNNPolicy())
    for graph in graphs():
        p = PlacementProblem.build(graph, load_cluster("post-4gpu"))
        t0 = time.perf_counter()
        state = ProblemState(p, measurer=object())
        build_s = time.perf_counter() - t0
        with torch.no_grad():
            scores = policy(state.features)
            rollout(state.sched, *scores.numpy(), GREEDY)  # compile outside the timing
        times, greedy_times, zero_times, one_times = [], [], [], []
        placer = GNNPlacer(policy=policy)
        one_order = GNNPlacer(policy=policy, config=FinetuneConfig(
            zero_shot_rollouts=ONE_ORDER_ROLLOUTS, zero_shot_both_orders=False))
        for r in range(args.repeats):
            t0 = time.perf_counter()
            with torch.no_grad():
                scores = policy(state.features)
                ro = rollout(state.sched, *scores.numpy(), SAMPLE, count=args.samples, seed=r)
                decision_logp(scores, ro)
            times.append(time.perf_counter() - t0)
            t0 = time.perf_counter()
            with torch.no_grad():
                rollout(state.sched, *policy(state.features).numpy(), GREEDY)
            greedy_times.append(time.perf_counter() - t0)
            t0 = time.perf_counter()
            placer._zero_shot(policy, state)
            zero_times.append(time.perf_counter() - t0)
            t0 = time.perf_counter()
            one_order._zero_shot(policy, state)
            one_times.append(time.perf_counter() - t0)
        med, g = statistics.median(times), statistics.median(greedy_times)
        z, one = statistics.median(zero_times), statistics.median(one_times)
        print(f"{graph.meta['name']}: {graph.num_ops:,} ops, {p.num_units:,} units: "
              f"{args.samples / med:,.0f} placements/s ({med * 1e3:.0f} ms for {args.samples} "
              f"with log-probs); greedy rollout (with the forward pass) {g * 1e3:.0f} ms; "
              f"zero-shot (greedy + {placer.config.zero_shot_rollouts} rollouts in each order"
              f"{' and of the untrained scores' if placer.config.zero_shot_prior else ''}, "
              f"ranked by the dispatch-order estimate, then {placer.config.zero_shot_polish:,} "
              f"estimate replays of its polish) {z * 1e3:.0f} ms, in HEFT's order alone "
              f"(greedy + {ONE_ORDER_ROLLOUTS}, polished alike) {one * 1e3:.0f} ms; "
              f"features and scheduler arrays {build_s * 1e3:.0f} ms once")


if __name__ == "__main__":
    main()
