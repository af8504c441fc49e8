#!/usr/bin/env bash
# Create or reuse .venv and install gplace with its test tools. Idempotent: a second run with
# an unchanged pyproject.toml does nothing but check.
set -euo pipefail
cd "$(dirname "$0")/.."
PY=${PYTHON:-python3}
[ -x .venv/bin/python ] || "$PY" -m venv .venv
stamp=.venv/.gplace-setup-stamp
want=$(cat pyproject.toml scripts/setup.sh | sha256sum | cut -d' ' -f1)
if [ -f "$stamp" ] && [ "$(cat "$stamp")" = "$want" ] && .venv/bin/python -c 'import gplace, tensorflow, torch' 2>/dev/null; then
  exit 0
fi
echo "setup: installing gplace into .venv (a few minutes the first time)" >&2
# torch, TensorFlow and the rest take about 3.5 GB in .venv plus pip's temporary files.
free_kb=$(df -Pk . | awk 'NR==2 {print $4}')
if [ "${free_kb:-0}" -lt 5000000 ]; then
  echo "setup: needs about 5 GB free on $(df -P . | awk 'NR==2 {print $6}') for .venv; $((free_kb / 1024)) MB free" >&2
  exit 1
fi
.venv/bin/python -m pip install -q --upgrade pip >&2
# The CPU build of torch 2.13.0; an unpinned torch would pull a CUDA build of several GB.
.venv/bin/python -m pip install -q "torch==2.13.0" >&2
.venv/bin/python -m pip install -q -e ".[cpu,dev]" >&2
echo "$want" > "$stamp"
