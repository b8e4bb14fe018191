#!/usr/bin/env bash
# Install (if needed) and run the app on the embedded default (demo corpus, GloVe, MiniLM, offline LLM).
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/setup.sh
export HF_HUB_OFFLINE=1 TRANSFORMERS_OFFLINE=1
exec .venv/bin/python -m streamlit run app.py "$@"
