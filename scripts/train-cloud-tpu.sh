#!/usr/bin/env bash
# Train seqcls on one 8-chip Cloud TPU host as a Vertex AI custom job.
# Writes the job's CustomJobSpec and runs gcloud ai custom-jobs create --config with it.
#
#   bash scripts/train-cloud-tpu.sh --project P --region R --bucket gs://B [options] [-- SEQCLS ARGS]
#
# Everything lands in gs://B/runs/NAME (baseOutputDirectory): config.yaml, checkpoints/,
# logs/ (TensorBoard), model/ and metrics.json.
#
#   --project P            Google Cloud project (default: $PROJECT, else gcloud's project)
#   --region R             Vertex AI region with the TPU, e.g. us-central1 (default: $REGION,
#                          else gcloud's ai/region)
#   --bucket gs://B        bucket (or gs://B/PREFIX) for the run (default: $BUCKET)
#   --image URI            training image (default: R-docker.pkg.dev/P/seqcls/seqcls-tpu:latest,
#                          what cloudbuild.yaml pushes with --substitutions=_REGION=R, the same
#                          region; $IMAGE; $REPOSITORY replaces seqcls)
#   --name NAME            job display name and run folder, at most 128 characters
#                          (default: seqcls-tpu-UTCDATE-TIME)
#   --service-account SA   run as this service account (default: $SERVICE_ACCOUNT, else Vertex's)
#   --env NAME=VALUE       set an environment variable in the training container (repeatable);
#                          values are stored in the job spec, visible to anyone who can view the
#                          job: pass a secret's name there, never the secret (docs/cloud.md)
#   --tpu T                v5e-8 (default: ct5lp-hightpu-8t, topology 2x4), v6e-8
#                          (ct6e-standard-8t, topology 2x4), v3-8 or v2-8 (cloud-tpu with 8
#                          TPU_V3 or TPU_V2 cores)
#   --spot                 Spot VMs: cheaper, may be preempted; the job restarts and the default
#                          arguments resume from checkpoints/last.ckpt
#   --dry-run              print the spec and the gcloud command; touch nothing, call nothing
#
# Arguments after -- are the container's: seqcls's own, verbatim (stack
# configs/trainer/tpu.yaml yourself). Without them:
#   fit --config configs/data/glue/rte.yaml --config configs/model/roberta-base.yaml
#       --config configs/trainer/tpu.yaml --ckpt_path last
# The launcher sets the run directory: a --trainer.default_root_dir there, or in a config file
# stacked there, must be a gs:// one.
# The files the job reads (--config, --data.*_file, --model.model_name_or_path, --ckpt_path,
# there or in a stacked config) must be in the image (configs/) or a bucket (gs://); the model
# may be a hub id (docs/cloud.md#your-data-on-a-vertex-ai-gpu).
set -euo pipefail
# shellcheck source=scripts/vertex-common.sh
source "$(dirname "$0")/vertex-common.sh"

image_name=seqcls-tpu
tpu=v5e-8

target_option() {
  case "$1" in
    --tpu) need_value "$@"; tpu="$2"; consumed=2 ;;
    --spot) spot=true; consumed=1 ;;
    *) return 1 ;;
  esac
}

check_target() {
  case "$tpu" in
    v5e-8 | v6e-8 | v3-8 | v2-8) ;;
    *) die "--tpu $tpu: one of v5e-8, v6e-8, v3-8, v2-8 (one host with 8 TPU chips or cores)" ;;
  esac
  refuse_trainer_configs configs/trainer/tpu.yaml configs/trainer/{gpu,multinode,cpu,deepspeed,fsdp}.yaml
}

default_seqcls_args() {
  seqcls_args=(fit --config configs/data/glue/rte.yaml --config configs/model/roberta-base.yaml
    --config configs/trainer/tpu.yaml --ckpt_path last)
}

# One replica: a TPU host trains alone. v5e and v6e name their chips by machine type and
# topology, v2 and v3 by accelerator type and count on the generic cloud-tpu machine.
worker_pools() {
  echo "  - machineSpec:"
  case "$tpu" in
    v5e-8)
      echo "      machineType: ct5lp-hightpu-8t"
      echo "      tpuTopology: 2x4"
      ;;
    v6e-8)
      echo "      machineType: ct6e-standard-8t"
      echo "      tpuTopology: 2x4"
      ;;
    v3-8)
      echo "      machineType: cloud-tpu"
      echo "      acceleratorType: TPU_V3"
      echo "      acceleratorCount: 8"
      ;;
    v2-8)
      echo "      machineType: cloud-tpu"
      echo "      acceleratorType: TPU_V2"
      echo "      acceleratorCount: 8"
      ;;
  esac
  echo "    replicaCount: 1"
  container_spec "$image" "${seqcls_args[@]}"
}

parse_options target_option "$@"
resolve_options
launch
