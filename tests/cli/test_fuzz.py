"""Fuzzing the CLI with mutated inputs: GraphDefs through ``gplace inspect`` and cluster YAMLs
through ``gplace simulate``. Each mutant must end with exit 0, or exit 2 and one line on stderr
that starts with ``gplace COMMAND: error:``; never a traceback, a crash or a hang.

The mutants are drawn from seeds (truncations, flipped bytes, and field-level edits: ports,
shapes, dtypes, op types, names, cycles, deleted and duplicated nodes; YAML numbers made huge,
negative, non-finite or text, lines deleted or duplicated, aliases, non-UTF-8 bytes). They run
in one worker process that calls ``gplace.cli.main`` in-process (TensorFlow starts once), under
a per-case alarm and an address-space limit; a worker that dies names its case and a new one
takes the next. Slow: a few minutes.
"""

from __future__ import annotations

import json
import random
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
EXAMPLE = ROOT / "gplace" / "examples" / "small_resnet.pb"
PRESET = ROOT / "gplace" / "clusters" / "hetero.yaml"
GRAPH_MUTANTS = 150
YAML_MUTANTS = 150
CASE_TIMEOUT_S = 60
MEMORY_LIMIT = 4 << 30  # address space, as tests/cli/test_robustness.py
HUGE = ("1e300", "-1", "0", ".nan", ".inf", "-.inf", "18446744073709551616", "x", "''", "[]",
        "{}", "1e-300", "2147483648", "true")


# ---- mutants ---------------------------------------------------------------------------------
def graph_mutants(base: bytes, count: int, seed: int = 0) -> list[tuple[str, bytes]]:
    """(what, bytes) of ``count`` mutated GraphDefs."""
    from tensorflow.core.framework import graph_pb2
    rng = random.Random(seed)
    out = []
    for i in range(count):
        kind = ("truncate", "flip", "field", "field", "field")[i % 5]
        if kind == "truncate":
            cut = rng.randrange(len(base))
            out.append((f"truncated at {cut}", base[:cut]))
        elif kind == "flip":
            data = bytearray(base)
            for _ in range(rng.randint(1, 8)):
                data[rng.randrange(len(data))] = rng.randrange(256)
            out.append(("flipped bytes", bytes(data)))
        else:
            g = graph_pb2.GraphDef.FromString(base)
            what = _edit_graph(g, rng)
            out.append((what, g.SerializeToString()))
    return out


def _edit_graph(g, rng: random.Random) -> str:
    nodes = g.node
    n = rng.randrange(len(nodes))
    node = nodes[n]
    edit = rng.choice(("port", "port", "input", "op", "shape", "dtype", "name", "cycle",
                       "self", "delete", "empty", "device", "attr"))
    if edit == "port" and node.input:
        k = rng.randrange(len(node.input))
        port = rng.choice((10**8, 2**31, 2**63, -1, 7, "x", ""))
        node.input[k] = f"{node.input[k].split(':')[0].lstrip('^')}:{port}"
        return f"{node.name}: input {k} port {port}"
    if edit == "input":
        node.input.append(rng.choice(("nowhere", "^nowhere", "a:b:c", "", "^")))
        return f"{node.name}: input {node.input[-1]!r}"
    if edit == "op":
        node.op = rng.choice(("NoSuchOp", "", "conv2d", nodes[rng.randrange(len(nodes))].op))
        return f"{node.name}: op {node.op!r}"
    if edit == "shape":
        for key in ("shape", "_output_shapes", "value"):
            if key in node.attr:
                dims = [rng.choice((2**40, 2**62, -5, 0, 10**12)) for _ in range(rng.randint(1, 4))]
                if key == "value" and node.attr[key].HasField("tensor"):
                    shape = node.attr[key].tensor.tensor_shape
                elif key == "_output_shapes" and node.attr[key].list.shape:
                    shape = node.attr[key].list.shape[0]
                else:
                    shape = node.attr[key].shape
                del shape.dim[:]
                for d in dims:
                    shape.dim.add(size=d)
                return f"{node.name}: {key} {dims}"
        return "no shape attr"
    if edit == "dtype":
        for key in ("T", "dtype", "DstT", "SrcT"):
            if key in node.attr:
                node.attr[key].type = rng.choice((0, 23, 99, 300, 10**6))
                return f"{node.name}: {key} = {node.attr[key].type}"
        return "no dtype attr"
    if edit == "name":
        node.name = rng.choice((nodes[rng.randrange(len(nodes))].name, "", "^x", "a b", "\u00e9"))
        return f"name {node.name!r}"
    if edit == "cycle":
        other = nodes[rng.randrange(len(nodes))]
        other.input.append(node.name)
        node.input.append(other.name)
        return f"cycle {node.name} <-> {other.name}"
    if edit == "self":
        node.input.append(rng.choice((node.name, f"^{node.name}")))
        return f"{node.name} feeds itself"
    if edit == "delete":
        del nodes[n]
        return f"deleted {node.name}"
    if edit == "empty":
        del nodes[:]
        return "no nodes"
    if edit == "device":
        node.device = rng.choice(("/device:GPU:99", "garbage", "/job:x/task:-1/device:CPU:0"))
        return f"{node.name}: device {node.device!r}"
    for key in list(node.attr)[:1]:
        node.attr[key].Clear()
        return f"{node.name}: attr {key} cleared"
    return "no attr"


def yaml_mutants(base: str, count: int, seed: int = 0) -> list[tuple[str, bytes]]:
    """(what, bytes) of ``count`` mutated cluster YAMLs."""
    import re
    rng = random.Random(seed)
    lines = base.splitlines(keepends=True)
    numbers = [m for m in re.finditer(r"(?<=: )[-+0-9.e]+(?=[,}\s])", base)]
    out = []
    for i in range(count):
        kind = rng.choice(("number", "number", "number", "truncate", "delete", "duplicate",
                           "alias", "bytes", "swap"))
        if kind == "number" and numbers:
            m = rng.choice(numbers)
            value = rng.choice(HUGE)
            out.append((f"number at {m.start()} -> {value}",
                        (base[:m.start()] + value + base[m.end():]).encode()))
        elif kind == "truncate":
            cut = rng.randrange(len(base))
            out.append((f"truncated at {cut}", base[:cut].encode()))
        elif kind == "delete":
            k = rng.randrange(len(lines))
            out.append((f"line {k} deleted", "".join(lines[:k] + lines[k + 1:]).encode()))
        elif kind == "duplicate":
            k = rng.randrange(len(lines))
            out.append((f"line {k} twice", "".join(lines[:k + 1] + lines[k:]).encode()))
        elif kind == "alias":
            out.append(("an alias", ("x: &a [1, 2]\ny: *a\n" + base).encode()))
        elif kind == "bytes":
            data = bytearray(base.encode())
            data[rng.randrange(len(data))] = rng.randrange(128, 256)
            out.append(("a non-UTF-8 byte", bytes(data)))
        else:
            a, b = rng.randrange(len(lines)), rng.randrange(len(lines))
            swapped = list(lines)
            swapped[a], swapped[b] = swapped[b], swapped[a]
            out.append((f"lines {a} and {b} swapped", "".join(swapped).encode()))
    return out


# ---- the worker ------------------------------------------------------------------------------
def worker(cases_file: str, start: int) -> None:
    """Runs cases from ``start``: prints 'start I' before and one JSON line after each."""
    import contextlib
    import io
    import resource
    import signal
    import traceback
    resource.setrlimit(resource.RLIMIT_AS, (MEMORY_LIMIT, MEMORY_LIMIT))
    from gplace.cli import main
    cases = json.loads(Path(cases_file).read_text())

    def alarm(*_):
        raise TimeoutError(f"over {CASE_TIMEOUT_S} s")

    signal.signal(signal.SIGALRM, alarm)
    for i in range(start, len(cases)):
        print(f"start {i}", flush=True)
        err = io.StringIO()
        signal.alarm(CASE_TIMEOUT_S)
        try:
            with contextlib.redirect_stderr(err), contextlib.redirect_stdout(io.StringIO()):
                try:
                    rc = main(cases[i]["argv"])
                except SystemExit as e:  # argparse
                    rc = e.code if isinstance(e.code, int) else 2
        except BaseException:  # noqa: BLE001 - what the test reports
            rc, err = -1, io.StringIO(err.getvalue() + traceback.format_exc())
        finally:
            signal.alarm(0)
        print(json.dumps({"i": i, "rc": rc, "stderr": err.getvalue()}), flush=True)


def run_all(cases: list[dict], tmp: Path) -> dict[int, dict]:
    """Every case's outcome; a worker that dies records its case and a fresh one goes on."""
    cases_file = tmp / "cases.json"
    cases_file.write_text(json.dumps(cases))
    results: dict[int, dict] = {}
    start = 0
    while start < len(cases):
        p = subprocess.run([sys.executable, __file__, "worker", str(cases_file), str(start)],
                           cwd=tmp, capture_output=True, text=True,
                           env={"PYTHONPATH": str(ROOT), "PATH": "/usr/bin:/bin",
                                "GPLACE_CACHE_DIR": "off", "TF_CPP_MIN_LOG_LEVEL": "3",
                                "HOME": str(tmp)},
                           timeout=CASE_TIMEOUT_S * (len(cases) - start) + 120)
        current = start
        for line in p.stdout.splitlines():
            if line.startswith("start "):
                current = int(line.split()[1])
            elif line.startswith("{"):
                r = json.loads(line)
                results[r["i"]] = r
        if len(results) == len(cases):
            break
        if current in results:  # died between cases (e.g. at exit): go on after it
            current = max(results) + 1
        else:
            results[current] = {"i": current, "rc": p.returncode,
                                "stderr": f"worker died ({p.returncode}): {p.stderr[-500:]}"}
        start = current + 1
    return results


def bad_outcome(command: str, r: dict) -> str | None:
    """Why an outcome breaks the rule of the module docstring, or None."""
    lines = [line for line in r["stderr"].splitlines() if line.strip()]
    if r["rc"] == 0:
        return None
    if r["rc"] != 2:
        return f"exit {r['rc']}: {r['stderr'][-400:]}"
    if "Traceback" in r["stderr"]:
        return f"traceback: {r['stderr'][-400:]}"
    if len(lines) != 1 or not lines[0].startswith(f"gplace {command}: error:"):
        return f"not one error line: {lines[:3]}"
    return None


@pytest.mark.slow
def test_mutated_graphs_and_cluster_yamls_get_one_line_or_a_result(tmp_path):
    pytest.importorskip("tensorflow")
    cases = []
    for k, (what, data) in enumerate(graph_mutants(EXAMPLE.read_bytes(), GRAPH_MUTANTS)):
        path = tmp_path / f"g{k}.pb"
        path.write_bytes(data)
        cases.append({"what": f"graph: {what}", "command": "inspect",
                      "argv": ["inspect", str(path)]})
    graph = tmp_path / "example.npz"
    subprocess.run([sys.executable, "-m", "gplace", "inspect", str(EXAMPLE), "--save", str(graph)],
                   check=True, capture_output=True, env={"PYTHONPATH": str(ROOT),
                                                         "PATH": "/usr/bin:/bin",
                                                         "GPLACE_CACHE_DIR": "off"})
    for k, (what, data) in enumerate(yaml_mutants(PRESET.read_text(), YAML_MUTANTS)):
        path = tmp_path / f"c{k}.yaml"
        path.write_bytes(data)
        cases.append({"what": f"cluster: {what}", "command": "simulate",
                      "argv": ["simulate", str(graph), "--cluster", str(path), "--random", "2"]})
    results = run_all(cases, tmp_path)
    bad = {cases[i]["what"]: why for i, r in sorted(results.items())
           if (why := bad_outcome(cases[i]["command"], r))}
    assert not bad, "\n".join(f"{k}: {v}" for k, v in list(bad.items())[:10])
    refused = sum(r["rc"] == 2 for r in results.values())
    assert len(results) == len(cases) and 0 < refused < len(cases)  # the mutants do both


def test_the_mutants_are_seeded_and_varied():
    base = PRESET.read_text()
    a, b = yaml_mutants(base, 40), yaml_mutants(base, 40)
    assert a == b and len({data for _, data in a}) > 30
    assert all(data != base.encode() for what, data in a if what.startswith("number"))


if __name__ == "__main__" and sys.argv[1:2] == ["worker"]:
    sys.path.insert(0, str(ROOT))
    worker(sys.argv[2], int(sys.argv[3]))
