#!/usr/bin/env bash
# Refresh requirements.lock: install the newest versions that pyproject.toml's ranges allow into
# an empty venv, run the default test suite there, and write the lock only if it passes.
set -euo pipefail
cd "$(dirname "$0")/.."
PY=${PYTHON:-python3}
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
"$PY" -m venv "$tmp/venv"
"$tmp/venv/bin/python" -m pip install -q --upgrade pip
"$tmp/venv/bin/python" -m pip install -q "torch==2.13.0"
"$tmp/venv/bin/python" -m pip install -q -e ".[cpu,dev,solver]"
"$tmp/venv/bin/python" -m pytest -q
{
  echo "# Every transitive version the test suite passed with (pip constraints; scripts/setup.sh installs with -c)."
  echo "# Refresh: bash scripts/lock.sh (fresh venv, newest versions inside pyproject.toml's ranges, then pytest)."
  "$tmp/venv/bin/python" -m pip freeze --exclude-editable | grep -v '^gplace'
} > requirements.lock.tmp
mv requirements.lock.tmp requirements.lock
echo "lock: requirements.lock refreshed"
