#!/usr/bin/env bash
# Set up .venv with the dev tools, then lint, type-check and run the tests.
# Extra arguments go to pytest:  bash scripts/test.sh -k data -x
set -euo pipefail
cd "$(dirname "$0")/.."

bash scripts/setup.sh dev,bench
export HF_HUB_OFFLINE="${HF_HUB_OFFLINE:-1}"
.venv/bin/ruff check .
.venv/bin/ruff format --check .
.venv/bin/mypy
.venv/bin/pytest "$@"
