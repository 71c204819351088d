#!/usr/bin/env bash
# Set up .venv with the dev tools, then lint, type-check and run the tests.
# Extra arguments go to pytest:  bash scripts/test.sh -k data -x
#
# bash scripts/test.sh --xla  runs only the XLA lane instead: tests/xla on one XLA:CPU device,
# in .venv-xla with torch and torch_xla from constraints-xla.txt (about 4 GB, set up on first use).
set -euo pipefail
cd "$(dirname "$0")/.."

xla=false
args=()
for arg in "$@"; do
  if [[ "$arg" == --xla ]]; then xla=true; else args+=("$arg"); fi
done
export HF_HUB_OFFLINE="${HF_HUB_OFFLINE:-1}"

if $xla; then
  SEQCLS_VENV=.venv-xla SEQCLS_PINS=constraints-xla.txt bash scripts/setup.sh dev
  exec .venv-xla/bin/pytest -m xla tests/xla "${args[@]}"
fi

bash scripts/setup.sh dev,bench
.venv/bin/ruff check .
.venv/bin/ruff format --check .
.venv/bin/mypy
# The XLA lane needs torch_xla, which only .venv-xla has.
.venv/bin/pytest -m "not xla" "${args[@]}"
