#!/usr/bin/env bash
# The quickstart: set up .venv, then fine-tune the packaged MiniLM on the sample data, on CPU.
# Needs no network beyond the package index. Extra arguments go to `seqcls fit`:
#   bash scripts/train-local.sh --trainer.max_epochs 1 --trainer.default_root_dir runs/one-epoch
# (a run directory of its own: runs/quickstart, once trained to 3 epochs, is not cut back to 1)
set -euo pipefail
cd "$(dirname "$0")/.."

bash scripts/setup.sh
# The quickstart model is a local directory; never wait on the Hugging Face Hub for it.
export HF_HUB_OFFLINE="${HF_HUB_OFFLINE:-1}"
exec .venv/bin/seqcls fit --config configs/local.yaml "$@"
