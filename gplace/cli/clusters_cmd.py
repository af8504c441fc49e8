"""``gplace clusters [--json]``: the cluster presets and their devices."""

from __future__ import annotations

import argparse
from collections import Counter

from gplace.io import plain_json


def add_parser(sub, name: str) -> argparse.ArgumentParser:
    p = sub.add_parser(name, help="list the cluster presets",
                       description="List the cluster presets (gplace/clusters/*.yaml and local).")
    p.add_argument("--json", action="store_true", help="print one JSON list on stdout")
    p.add_argument("names", nargs="*", help="only these presets or cluster YAML files")
    return p


def run(args) -> int:
    from gplace.cluster import load_cluster, preset_names
    clusters = [load_cluster(n) for n in (args.names or preset_names())]
    if args.json:
        print(plain_json([c.summary() for c in clusters]))
        return 0
    for c in clusters:
        kinds = Counter(d.kind for d in c.devices)
        mix = " + ".join(f"{k}x {kind}" for kind, k in kinds.items())
        print(f"{c.name:<12} {c.num_devices:>2} device{'s' if c.num_devices != 1 else ' '} "
              f"({mix}): {c.description}")
    return 0
