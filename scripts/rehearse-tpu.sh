#!/usr/bin/env bash
# Rehearse a TPU job on the CPU before paying for a TPU (docs/tpu.md): configs/trainer/tpu.yaml
# as shipped on one XLA:CPU device, its run directory on gs:// (a local GCS emulator, or
# --bucket gs://BUCKET/PATH), SIGTERM mid-run, then the same command again, which must resume
# from the bucket's last.ckpt and finish. Fails if anything recompiles after warm-up.
#
#   bash scripts/rehearse-tpu.sh [--bucket gs://BUCKET/PATH] [-- more seqcls fit arguments]
#
# It runs in .venv-xla, the XLA test lane's environment (torch_xla, about 4 GB on first use).
set -euo pipefail
cd "$(dirname "$0")/.."
SEQCLS_VENV=.venv-xla SEQCLS_PINS=constraints-xla.txt bash scripts/setup.sh dev
exec .venv-xla/bin/python scripts/rehearse_tpu.py "$@"
