#!/usr/bin/env bash
# Set up .venv with the dev tools, then lint, type-check and run the tests.
# Extra arguments go to pytest:  bash scripts/test.sh -k data -x
#
# bash scripts/test.sh --xla  runs only the XLA lane instead: tests/xla on one XLA:CPU device
# (the TPU rehearsal, scripts/rehearse-tpu.sh, included),
# in .venv-xla with torch and torch_xla from constraints-xla.txt (about 4 GB, set up on first use).
# bash scripts/test.sh --cloud  runs only the cloud lane, which the default run ends with:
# tests/cloud (Google's protos, hadolint, shellcheck) in .venv-cloud with the cloud-lint extra.
# bash scripts/test.sh --deepspeed  runs only the DeepSpeed lane: tests/zero, real ZeRO stage 2
# checkpoints on DeepSpeed's CPU accelerator, in .venv-deepspeed with the deepspeed extra.
set -euo pipefail
cd "$(dirname "$0")/.."

xla=false
cloud_only=false
deepspeed=false
args=()
for arg in "$@"; do
  case "$arg" in
    --xla) xla=true ;;
    --cloud) cloud_only=true ;;
    --deepspeed) deepspeed=true ;;
    *) args+=("$arg") ;;
  esac
done
export HF_HUB_OFFLINE="${HF_HUB_OFFLINE:-1}"

if $xla; then
  SEQCLS_VENV=.venv-xla SEQCLS_PINS=constraints-xla.txt bash scripts/setup.sh dev
  exec .venv-xla/bin/pytest -m xla tests/xla "${args[@]}"
fi

if $deepspeed; then
  SEQCLS_VENV=.venv-deepspeed bash scripts/setup.sh dev,deepspeed
  exec .venv-deepspeed/bin/pytest -m deepspeed tests/zero "${args[@]}"
fi

cloud_lane() {
  SEQCLS_VENV=.venv-cloud SEQCLS_PINS=constraints-cloud.txt bash scripts/setup.sh dev,cloud-lint
  # SEQCLS_CLOUD_LANE: a missing tool fails instead of skipping. Exit 5 means that no test was
  # selected, as when -k names only main-lane tests.
  SEQCLS_CLOUD_LANE=1 .venv-cloud/bin/pytest -m cloud tests/cloud "${args[@]}" || (($? == 5))
}
if $cloud_only; then
  cloud_lane
  exit 0
fi

bash scripts/setup.sh dev,bench,tune,serve
.venv/bin/ruff check .
.venv/bin/ruff format --check .
.venv/bin/mypy
# The XLA, cloud and DeepSpeed lanes need what only their own venvs have.
.venv/bin/pytest -m "not xla and not cloud and not deepspeed" "${args[@]}"
cloud_lane
