"""Exports the example training steps to ``.pt2`` files: ``python -m gplace.examples.torch.build
[--out DIR] [--profile] [NAME ...]`` (default: all five, beside this file). Each file is the
forward from batch to loss, ``torch.export.save``-d with its example batch, which is what
``gplace place`` and ``gplace.load_graph`` read. ``--profile`` also measures each node's CPU
time (SGD step, gplace.torchfront.profile) into ``<name>.profile.json.gz`` beside it, which
the cost model then uses for CPU devices of kind ``cpu``."""

from __future__ import annotations

import argparse
from pathlib import Path

import torch

from gplace.examples.torch.models import EXAMPLES, build

HERE = Path(__file__).resolve().parent


def export_example(name: str, out: Path, seed: int = 0) -> Path:
    """Writes ``out/<name>.pt2`` and returns its path."""
    module, batch = build(name, seed)
    program = torch.export.export(module, batch)
    out.mkdir(parents=True, exist_ok=True)
    path = out / f"{name}.pt2"
    torch.export.save(program, path)
    return path


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("names", nargs="*", default=list(EXAMPLES), help="examples (default: all)")
    p.add_argument("--out", type=Path, default=HERE, help="folder for the .pt2 files")
    p.add_argument("--profile", action="store_true", help="also write measured CPU profiles")
    args = p.parse_args(argv)
    for name in args.names:
        path = export_example(name, args.out)
        print(path)
        if args.profile:
            print(write_profile(path))
    return 0


def write_profile(path: Path, optimizer: str = "sgd") -> Path:
    """Measures the step of the program at ``path`` on this CPU; writes and returns the
    profile file beside it."""
    from gplace.torchfront.profile import profile_file, profile_path
    profile, _ = profile_file(path, optimizer)
    out = profile_path(path)
    profile.save(out)
    return out


if __name__ == "__main__":
    raise SystemExit(main())
