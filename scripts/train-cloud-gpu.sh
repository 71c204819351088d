#!/usr/bin/env bash
# Train seqcls on GPUs as a Vertex AI custom job: 1..N nodes x M GPUs, optionally on Spot VMs.
# Writes the job's CustomJobSpec and runs gcloud ai custom-jobs create --config with it.
#
#   bash scripts/train-cloud-gpu.sh --project P --region R --bucket gs://B [options] [-- SEQCLS ARGS]
#
# Everything lands in gs://B/runs/NAME (baseOutputDirectory): config.yaml, checkpoints/,
# logs/ (TensorBoard), model/ and metrics.json.
#
#   --project P            Google Cloud project (default: $PROJECT, else gcloud's project)
#   --region R             Vertex AI region, e.g. us-central1 (default: $REGION, else gcloud's ai/region)
#   --bucket gs://B        bucket (or gs://B/PREFIX) for the run (default: $BUCKET)
#   --image URI            training image (default: R-docker.pkg.dev/P/seqcls/seqcls-gpu:latest,
#                          what cloudbuild.yaml pushes; $IMAGE; $REPOSITORY replaces seqcls)
#   --name NAME            job display name and run folder (default: seqcls-gpu-UTCDATE-TIME)
#   --service-account SA   run as this service account (default: $SERVICE_ACCOUNT, else Vertex's)
#   --machine-type T       default g2-standard-12; the families and their GPUs:
#                          a2-highgpu/a2-megagpu NVIDIA_TESLA_A100, a2-ultragpu NVIDIA_A100_80GB,
#                          a3-highgpu NVIDIA_H100_80GB, a3-megagpu NVIDIA_H100_MEGA_80GB,
#                          a3-ultragpu NVIDIA_H200_141GB, g2 NVIDIA_L4,
#                          n1 NVIDIA_TESLA_T4 (default), _V100, _P100 or _P4
#   --accelerator-type A   default: the machine type's GPU
#   --accelerator-count C  GPUs per node; default: what the machine type has (n1: 1)
#   --nodes N              nodes (default 1): 1 primary (workerpool0) + N-1 workers (workerpool1)
#   --spot                 Spot VMs: cheaper, may be preempted; the job restarts and the default
#                          arguments resume from checkpoints/last.ckpt
#   --reduction-server R   R Reduction Server replicas (n1-highcpu-16) that sum the gradients
#                          between nodes (workerpool2); needs --nodes 2 or more
#   --dry-run              print the spec and the gcloud command; touch nothing, call nothing
#
# Arguments after -- are the container's: seqcls's own, verbatim. Without them:
#   fit --config configs/data/glue/rte.yaml --config configs/model/roberta-base.yaml
#       --config configs/trainer/gpu.yaml (multinode.yaml with --nodes 2+) --ckpt_path last
set -euo pipefail
# shellcheck source=scripts/vertex-common.sh
source "$(dirname "$0")/vertex-common.sh"

image_name=seqcls-gpu
machine_type=g2-standard-12
accelerator_type=""
accelerator_count=""
nodes=1
reducers=0
reduction_server_image=us-docker.pkg.dev/vertex-ai-restricted/training/reductionserver:latest
reduction_server_machine=n1-highcpu-16
known_gpus="NVIDIA_TESLA_A100 NVIDIA_A100_80GB NVIDIA_H100_80GB NVIDIA_H100_MEGA_80GB NVIDIA_H200_141GB NVIDIA_L4 NVIDIA_TESLA_T4 NVIDIA_TESLA_V100 NVIDIA_TESLA_P100 NVIDIA_TESLA_P4"

target_option() {
  case "$1" in
    --machine-type) need_value "$@"; machine_type="$2"; consumed=2 ;;
    --accelerator-type) need_value "$@"; accelerator_type="$2"; consumed=2 ;;
    --accelerator-count) need_value "$@"; accelerator_count="$2"; consumed=2 ;;
    --nodes) need_value "$@"; nodes="$2"; consumed=2 ;;
    --reduction-server) need_value "$@"; reducers="$2"; consumed=2 ;;
    --spot) spot=true; consumed=1 ;;
    *) return 1 ;;
  esac
}

# The GPUs a machine family carries, the default first. Vertex AI rejects other pairs.
machine_gpus() {
  case "$1" in
    a2-highgpu-* | a2-megagpu-*) echo NVIDIA_TESLA_A100 ;;
    a2-ultragpu-*) echo NVIDIA_A100_80GB ;;
    a3-highgpu-*) echo NVIDIA_H100_80GB ;;
    a3-megagpu-*) echo NVIDIA_H100_MEGA_80GB ;;
    a3-ultragpu-*) echo NVIDIA_H200_141GB ;;
    g2-*) echo NVIDIA_L4 ;;
    n1-*) echo NVIDIA_TESLA_T4 NVIDIA_TESLA_V100 NVIDIA_TESLA_P100 NVIDIA_TESLA_P4 ;;
  esac
}

# The machine types that carry a GPU, for the error message.
gpu_machines() {
  case "$1" in
    NVIDIA_TESLA_A100) echo "a2-highgpu-* or a2-megagpu-*" ;;
    NVIDIA_A100_80GB) echo "a2-ultragpu-*" ;;
    NVIDIA_H100_80GB) echo "a3-highgpu-*" ;;
    NVIDIA_H100_MEGA_80GB) echo "a3-megagpu-*" ;;
    NVIDIA_H200_141GB) echo "a3-ultragpu-*" ;;
    NVIDIA_L4) echo "g2-*" ;;
    NVIDIA_TESLA_T4 | NVIDIA_TESLA_V100 | NVIDIA_TESLA_P100 | NVIDIA_TESLA_P4) echo "n1-*" ;;
  esac
}

# The GPUs per node that a machine type comes with: a2/a3 say it in the name (a2-highgpu-4g),
# g2 by its size; n1 takes 1, 2, 4 or 8 (default 1).
machine_gpu_count() {
  case "$1" in
    a2-* | a3-*) [[ "$1" =~ -([0-9]+)g$ ]] && echo "${BASH_REMATCH[1]}" ;;
    g2-standard-24) echo 2 ;;
    g2-standard-48) echo 4 ;;
    g2-standard-96) echo 8 ;;
    g2-*) echo 1 ;;
  esac
}

check_target() {
  local gpus fixed_count
  gpus="$(machine_gpus "$machine_type")"
  [[ -n "$gpus" ]] ||
    die "--machine-type $machine_type: not a GPU machine type this script knows (a2-*, a3-*, g2-*, n1-*)"
  accelerator_type="${accelerator_type:-${gpus%% *}}"
  if [[ " $gpus " != *" $accelerator_type "* ]]; then
    local fits
    fits="$(gpu_machines "$accelerator_type")"
    [[ -n "$fits" ]] ||
      die "--accelerator-type $accelerator_type: unknown; one of ${known_gpus// /, }"
    die "--accelerator-type $accelerator_type does not fit --machine-type $machine_type, which carries ${gpus// /, }; for $accelerator_type use $fits"
  fi
  fixed_count="$(machine_gpu_count "$machine_type")"
  accelerator_count="${accelerator_count:-${fixed_count:-1}}"
  need_count --accelerator-count "$accelerator_count" 1
  [[ -z "$fixed_count" || "$accelerator_count" == "$fixed_count" ]] ||
    die "--accelerator-count $accelerator_count: $machine_type comes with $fixed_count GPU(s); leave the count out or pick another machine type"
  need_count --nodes "$nodes" 1
  need_count --reduction-server "$reducers" 0
  ((reducers == 0 || nodes > 1)) ||
    die "--reduction-server $reducers needs --nodes 2 or more: reducers sum gradients between nodes"
  ((nodes == 1)) || restart_workers=true
}

default_seqcls_args() {
  local trainer=configs/trainer/gpu.yaml
  ((nodes == 1)) || trainer=configs/trainer/multinode.yaml
  seqcls_args=(fit --config configs/data/glue/rte.yaml --config configs/model/roberta-base.yaml
    --config "$trainer" --ckpt_path last)
}

# One pool per role: the primary node, the other nodes, then the reducers.
worker_pools() {
  local replicas
  for replicas in 1 $((nodes - 1)); do
    ((replicas)) || continue
    echo "  - machineSpec:"
    echo "      machineType: $machine_type"
    echo "      acceleratorType: $accelerator_type"
    echo "      acceleratorCount: $accelerator_count"
    echo "    replicaCount: $replicas"
    container_spec "$image" "${seqcls_args[@]}"
  done
  ((reducers)) || return 0
  echo "  - machineSpec:"
  echo "      machineType: $reduction_server_machine"
  echo "    replicaCount: $reducers"
  container_spec "$reduction_server_image"
}

parse_options target_option "$@"
resolve_options
launch
