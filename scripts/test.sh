#!/usr/bin/env bash
# Install (if needed) and run the whole test suite. Extra arguments go to pytest.
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/setup.sh --dev
# The real-browser test drives Debian's chromium (Playwright never downloads a browser here).
if [ ! -x /usr/bin/chromium ] && command -v apt-get >/dev/null 2>&1; then
  SUDO=""; [ "$(id -u)" -ne 0 ] && command -v sudo >/dev/null 2>&1 && SUDO="sudo"
  if [ "$(id -u)" -eq 0 ] || [ -n "$SUDO" ]; then
    $SUDO apt-get update -qq && DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y -qq chromium >/dev/null
  fi
fi
export HF_HUB_OFFLINE=1 TRANSFORMERS_OFFLINE=1
# Two workers (pytest-xdist), a test file per worker at a time: the suite's time halves on a 2-core machine (CI);
# DPKPS_TEST_WORKERS=0 runs it in one process (e.g. to debug a failure).
exec .venv/bin/python -m pytest -n "${DPKPS_TEST_WORKERS:-2}" --dist loadfile "$@"
