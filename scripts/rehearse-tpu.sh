#!/usr/bin/env bash
# Rehearse a TPU job on the CPU before paying for a TPU (docs/tpu.md): configs/trainer/tpu.yaml
# as shipped on one XLA:CPU device, its run directory on gs:// (a local GCS emulator, or
# --bucket gs://BUCKET/PATH), SIGTERM mid-run, then the same command again, which must resume
# from the bucket's last.ckpt and finish. Fails if anything recompiles after warm-up.
#
#   bash scripts/rehearse-tpu.sh [--bucket gs://BUCKET/PATH] [--stop-after-steps N] [-- more seqcls fit arguments]
#
# It runs in .venv-xla, the XLA test lane's environment (torch_xla, about 4 GB on first use).
set -euo pipefail
script="$(basename "$0")"

die() {
  echo "$script: $*" >&2
  exit 2
}

# The options are checked before the set-up, which installs gigabytes: a mistake stops at once.
args=("$@")
while (($#)); do
  if [[ "$1" == --?*=* ]]; then set -- "${1%%=*}" "${1#*=}" "${@:2}"; fi
  case "$1" in
    -h | --help) sed -n '2,/^[^#]/{/^#/s/^# \{0,1\}//p}' "$0"; exit 0 ;;
    --bucket)
      [[ $# -ge 2 && "$2" == gs://?* ]] ||
        die "--bucket ${2:-}: expected a gs:// folder, e.g. --bucket gs://my-bucket/rehearsals"
      shift 2
      ;;
    --stop-after-steps)
      [[ $# -ge 2 && "$2" =~ ^[1-9][0-9]{0,8}$ ]] ||
        die "--stop-after-steps ${2:-}: expected a whole number >= 1, e.g. --stop-after-steps 4"
      shift 2
      ;;
    --) break ;;
    *) die "unknown option '$1'; see $script --help (seqcls fit arguments go after --)" ;;
  esac
done

cd "$(dirname "$0")/.."
SEQCLS_VENV=.venv-xla SEQCLS_PINS=constraints-xla.txt bash scripts/setup.sh dev
exec .venv-xla/bin/python scripts/rehearse_tpu.py "${args[@]}"
