#!/usr/bin/env bash
# Create or reuse .venv and install gplace with its test tools at the versions locked in
# requirements.lock. Idempotent: a second run with unchanged inputs does nothing but check.
# GPLACE_VENV=DIR installs into another folder (CI uses an empty one).
set -euo pipefail
cd "$(dirname "$0")/.."
PY=${PYTHON:-python3}
VENV=${GPLACE_VENV:-.venv}
LOCK=${GPLACE_LOCK:-requirements.lock}
[ -x "$VENV/bin/python" ] || "$PY" -m venv "$VENV"
stamp=$VENV/.gplace-setup-stamp
want=$(cat pyproject.toml scripts/setup.sh "$LOCK" | sha256sum | cut -d' ' -f1)
# Done before with these inputs, and the packages still there (found, not imported: importing
# TensorFlow and torch would add 7 s to every run of the README's first command).
if [ -f "$stamp" ] && [ "$(cat "$stamp")" = "$want" ] && "$VENV/bin/python" -c '
import importlib.util as u, sys
sys.exit(any(u.find_spec(m) is None for m in ("gplace", "tensorflow", "torch", "numba")))' 2>/dev/null; then
  exit 0
fi
echo "setup: installing gplace into $VENV (a few minutes the first time)" >&2
# torch, TensorFlow and the rest take about 3.5 GB plus pip's temporary files.
free_kb=$(df -Pk . | awk 'NR==2 {print $4}')
if [ "${free_kb:-0}" -lt 5000000 ]; then
  echo "setup: needs about 5 GB free on $(df -P . | awk 'NR==2 {print $6}') for $VENV; $((free_kb / 1024)) MB free" >&2
  exit 1
fi
"$VENV/bin/python" -m pip install -q --upgrade pip >&2
# The CPU build of torch 2.13.0 first; an unpinned torch would pull a CUDA build of several GB.
"$VENV/bin/python" -m pip install -q "torch==2.13.0" >&2
"$VENV/bin/python" -m pip install -q -c "$LOCK" -e ".[cpu,dev,solver]" >&2
# Compile the simulator and rollout kernels now, so that the first `gplace place` does not.
"$VENV/bin/python" -m gplace.warmup >&2 || echo "setup: kernel warm-up failed; they compile on first use" >&2
echo "$want" > "$stamp"
