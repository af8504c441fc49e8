"""The ``gplace`` command. Each subcommand lives in its own module with ``add_parser`` and ``run``.

Bad input (a GplaceError or a bad option) prints one line on stderr and exits 2; Ctrl-C exits
130. Arguments are checked (gplace.cli.checks) before any subcommand imports TensorFlow or torch.
"""

from __future__ import annotations

import argparse
import importlib
import os
import sys

# Subcommand name -> module under gplace.cli; modules are imported only when used.
_COMMANDS = {
    "inspect": "inspect_cmd",
    "simulate": "simulate_cmd",
    "clusters": "clusters_cmd",
    "bench": "bench_cmd",
    "calibrate": "calibrate_cmd",
    "pretrain": "pretrain_cmd",
    "place": "place_cmd",
    "profile": "profile_cmd",
}


class Parser(argparse.ArgumentParser):
    """An ArgumentParser whose errors are one line (the usage is one ``--help`` away)."""

    def error(self, message: str):
        self.exit(2, f"{self.prog}: error: {message} (see {self.prog} --help)\n")


def build_parser() -> argparse.ArgumentParser:
    parser = Parser(
        prog="gplace",
        description="Device placement for TensorFlow and PyTorch training-step graphs.")
    from gplace import __version__
    parser.add_argument("--version", action="version", version=f"gplace {__version__}")
    sub = parser.add_subparsers(dest="command", metavar="COMMAND", required=True)
    for name, module in _COMMANDS.items():
        mod = importlib.import_module(f"gplace.cli.{module}")
        p = mod.add_parser(sub, name)
        p.set_defaults(_run=mod.run, _parser=p)
    return parser


def _attach_negative_values(argv: list[str], takes_value: set[str]) -> list[str]:
    """``--memory-limit -5MB`` as ``--memory-limit=-5MB`` for the options in ``takes_value``:
    argparse reads a value that starts with '-' and is not a plain number as an option, and
    would answer "expected one argument" instead of the option's own check."""
    out: list[str] = []
    for token in argv:
        previous = out[-1] if out else ""
        if (len(token) > 1 and token[0] == "-" and (token[1].isdigit() or token[1] == ".")
                and previous in takes_value):
            out[-1] = f"{previous}={token}"
        else:
            out.append(token)
    return out


def _value_options(parser: argparse.ArgumentParser, argv: list[str]) -> set[str]:
    """The long options of ``argv``'s subcommand that take a value."""
    commands = next(a for a in parser._actions if isinstance(a, argparse._SubParsersAction))
    sub = commands.choices.get(argv[0]) if argv else None
    if sub is None:
        return set()
    return {o for a in sub._actions if a.nargs != 0 for o in a.option_strings
            if o.startswith("--")}


def parse(argv: list[str] | None) -> argparse.Namespace:
    """The arguments; an unknown option is the subcommand's error (``gplace place: error:``),
    as a bad value of a known one is."""
    parser = build_parser()
    argv = list(sys.argv[1:] if argv is None else argv)
    args, extra = parser.parse_known_args(_attach_negative_values(
        argv, _value_options(parser, argv)))
    if extra:
        args._parser.error(f"unrecognized arguments: {' '.join(extra)}")
    return args


def _torch_cache_beside_ours() -> None:
    """torch's compiler makes its cache folder (``torchinductor_<user>``) in $TMPDIR as soon as
    PyG imports it; it goes beside gplace's own cache instead (nothing when that is off)."""
    from gplace.opgraph_cache import cache_folder
    folder = cache_folder()
    if folder is not None:
        os.environ.setdefault("TORCHINDUCTOR_CACHE_DIR", str(folder.parent / "torchinductor"))


def main(argv: list[str] | None = None) -> int:
    os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "3")  # TF's C++ start-up chatter
    _torch_cache_beside_ours()
    from gplace.allocator import keep_freed_memory
    keep_freed_memory()  # fine-tuning's passes reuse their memory instead of faulting it in
    from gplace.cli.interrupt import Terminated, interruptible
    from gplace.errors import GplaceError
    args = parse(argv)
    try:
        with interruptible():
            return int(args._run(args) or 0)
    except GplaceError as e:
        print(f"gplace {args.command}: error: {e}", file=sys.stderr)
        return 2
    except KeyboardInterrupt as e:
        terminated = isinstance(e, Terminated)
        print(f"gplace {args.command}: interrupted{' (SIGTERM)' if terminated else ''}; "
              "run the same command again to resume" if args.command == "pretrain" else
              f"gplace {args.command}: interrupted", file=sys.stderr)
        return 143 if terminated else 130
    except BrokenPipeError:  # `gplace inspect m.pb | head`: the reader left; say nothing
        os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())
        return 141


if __name__ == "__main__":
    sys.exit(main())
