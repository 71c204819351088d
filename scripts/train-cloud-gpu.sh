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
#                          what cloudbuild.yaml pushes with --substitutions=_REGION=R, the same
#                          region; $IMAGE; $REPOSITORY replaces seqcls)
#   --name NAME            job display name and run folder, at most 128 characters
#                          (default: seqcls-gpu-UTCDATE-TIME)
#   --service-account SA   run as this service account (default: $SERVICE_ACCOUNT, else Vertex's)
#   --env NAME=VALUE       set an environment variable in the training container (repeatable);
#                          values are stored in the job spec, visible to anyone who can view the
#                          job: pass a secret's name there, never the secret (docs/cloud.md)
#   --machine-type T       default g2-standard-12; the families (a2/a3: -Ng, the GPU count)
#                          and their GPUs:
#                          a2-highgpu/a2-megagpu NVIDIA_TESLA_A100, a2-ultragpu NVIDIA_A100_80GB,
#                          a3-highgpu NVIDIA_H100_80GB, a3-megagpu NVIDIA_H100_MEGA_80GB,
#                          a3-ultragpu NVIDIA_H200_141GB, g2 NVIDIA_L4,
#                          n1 NVIDIA_TESLA_T4 (default), _V100 or _P4
#   --accelerator-type A   default: the machine type's GPU
#   --accelerator-count C  GPUs per node; default: what the machine type has (n1: 1; T4 and
#                          P4 take 1, 2 or 4, V100 1, 2, 4 or 8)
#   --nodes N              nodes (default 1): 1 primary (workerpool0) + N-1 workers (workerpool1)
#   --spot                 Spot VMs: cheaper, may be preempted; the job restarts and the default
#                          arguments resume from checkpoints/last.ckpt
#   --reduction-server R   R Reduction Server replicas (n1-highcpu-16) that sum the gradients
#                          between nodes (workerpool2); needs --nodes 2 or more. auto: as many
#                          as Google advises, enough that the reducers' egress bandwidth (32
#                          Gbps each) matches the nodes' (a2-highgpu-8g: 100 Gbps): 4 such
#                          nodes take 13 reducers
#   --tune N               a hyper-parameter tuning job of N trials instead (gcloud ai
#                          hp-tuning-jobs create): each trial is the job above with one value
#                          per flag of the search space appended, and lands in its own folder,
#                          gs://B/runs/NAME/TRIAL_ID (docs/tuning.md)
#   --parallel K           trials that run at once (default 1); this and the three below
#                          only with --tune
#   --tune-space FILE      the search space (default configs/tune/space.yaml, as seqcls tune)
#   --tune-metric M        the validation metric to optimise, val/NAME as seqcls logs it
#                          (default: the one that picks the best checkpoint, the first of the
#                          stacked data config's metrics: val/accuracy for GLUE RTE,
#                          val/pearson for STS-B; val/mse and val/loss are minimised, the
#                          others maximised)
#   --tune-algorithm A     ALGORITHM_UNSPECIFIED (default: Vertex AI's Bayesian search),
#                          GRID_SEARCH (every parameter of the space with a step or choices)
#                          or RANDOM_SEARCH
#   --dry-run              print the spec and the gcloud command; touch nothing, call nothing
#
# Arguments after -- are the container's: seqcls's own, verbatim. Without them:
#   fit --config configs/data/glue/rte.yaml --config configs/model/roberta-base.yaml
#       --config configs/trainer/gpu.yaml (multinode.yaml with --nodes 2+) --ckpt_path last
# plus --trainer.precision 16-mixed on n1 machines: T4, V100 and P4 have no bf16. The launcher
# sets the run directory: a --trainer.default_root_dir there, or in a config file stacked
# there, must be a gs:// one.
# The files the job reads (--config, --data.*_file, --model.model_name_or_path, --ckpt_path,
# there or in a stacked config) must be in the image (configs/) or a bucket (gs://); the model
# may be a hub id (docs/cloud.md#your-data-on-a-vertex-ai-gpu).
set -euo pipefail
# shellcheck source=scripts/vertex-common.sh
source "$(dirname "$0")/vertex-common.sh"
# shellcheck source=scripts/vertex-gpus.sh
source "$(dirname "$0")/vertex-gpus.sh"

image_name=seqcls-gpu
machine_type=g2-standard-12
accelerator_type=""
accelerator_count=""
nodes=1
reducers=0
reduction_server_image=us-docker.pkg.dev/vertex-ai-restricted/training/reductionserver:latest
reduction_server_machine=n1-highcpu-16
reduction_server_gbps=32 # n1-highcpu-16's egress bandwidth

target_option() {
  case "$1" in
    --machine-type) need_value "$@"; machine_type="$2"; consumed=2 ;;
    --accelerator-type) need_value "$@"; accelerator_type="$2"; consumed=2 ;;
    --accelerator-count) need_value "$@"; accelerator_count="$2"; consumed=2 ;;
    --nodes) need_value "$@"; nodes="$2"; consumed=2 ;;
    --reduction-server) need_value "$@"; reducers="$2"; consumed=2 ;;
    --spot) spot=true; consumed=1 ;;
    --tune) need_value "$@"; tune_trials="$2"; consumed=2 ;;
    --parallel) need_value "$@"; tune_parallel="$2"; tune_option_given=--parallel; consumed=2 ;;
    --tune-space) need_value "$@"; tune_space="$2"; tune_option_given=--tune-space; consumed=2 ;;
    --tune-metric) need_value "$@"; tune_metric="$2"; tune_option_given=--tune-metric; consumed=2 ;;
    --tune-algorithm) need_value "$@"; tune_algorithm="$2"; tune_option_given=--tune-algorithm; consumed=2 ;;
    *) return 1 ;;
  esac
}

check_machine_type() {
  [[ " $known_machines " == *" $machine_type "* || "$machine_type" =~ ^n1-(standard|highmem|highcpu)-[1-9][0-9]*$ ]] ||
    die "--machine-type $machine_type: not a GPU machine type this script knows; one of a2-highgpu-{1,2,4,8}g, a2-megagpu-16g, a2-ultragpu-{1,2,4,8}g, a3-highgpu-{1,2,4,8}g, a3-megagpu-8g, a3-ultragpu-8g, g2-standard-{4,8,12,16,24,32,48,96}, n1-{standard,highmem,highcpu}-CPUS"
}

# A GPU machine type's egress bandwidth in Gbps, or nothing where this script does not know it.
machine_egress_gbps() {
  case "$1" in
    a2-highgpu-1g | a2-ultragpu-1g) echo 24 ;;
    a2-highgpu-2g | a2-ultragpu-2g) echo 32 ;;
    a2-highgpu-4g | a2-ultragpu-4g) echo 50 ;;
    a2-highgpu-8g | a2-ultragpu-8g | a2-megagpu-16g) echo 100 ;;
    g2-standard-4) echo 10 ;;
    g2-standard-8 | g2-standard-12) echo 16 ;;
    g2-standard-16 | g2-standard-24 | g2-standard-32) echo 32 ;;
    g2-standard-48) echo 50 ;;
    g2-standard-96) echo 100 ;;
    # n1: 2 Gbps per vCPU, at most 32.
    n1-*-[0-9]*) local cpus="${1##*-}" && echo $((2 * cpus < 32 ? 2 * cpus : 32)) ;;
  esac
}

# Google's advice for Reduction Server: the reducers together send at least as fast as the
# training nodes together, so none waits on the network.
reducers_advised() {
  local gbps
  gbps="$(machine_egress_gbps "$machine_type")"
  [[ -n "$gbps" ]] || return 0
  echo $(((nodes * gbps + reduction_server_gbps - 1) / reduction_server_gbps))
}

check_reducers() {
  local advised
  # Decimal without leading zeros, as need_count: bash and YAML 1.1 read 010 as octal.
  [[ "$reducers" == auto || "$reducers" =~ ^[1-9][0-9]{0,8}$ ]] ||
    die "--reduction-server $reducers: expected a count of reducers, or auto; a count in decimal without leading zeros"
  ((nodes > 1)) ||
    die "--reduction-server $reducers needs --nodes 2 or more: reducers sum gradients between nodes"
  advised="$(reducers_advised)"
  if [[ "$reducers" == auto ]]; then
    [[ -n "$advised" ]] ||
      die "--reduction-server auto: the egress bandwidth of $machine_type is not known here; give a count"
    reducers="$advised"
    return 0
  fi
  if [[ -n "$advised" ]] && ((reducers < advised)); then
    echo "$script: warning: --reduction-server $reducers: $nodes x $machine_type send faster than $reducers reducers can take; Google advises $advised (--reduction-server auto)" >&2
  fi
}

check_target() {
  check_machine_type
  check_gpu_pair
  if [[ "$machine_type" == n1-* ]]; then check_n1_precision; fi
  need_count --nodes "$nodes" 1
  [[ "$reducers" == 0 ]] || check_reducers
  ((nodes == 1)) || restart_workers=true
  refuse_trainer_configs configs/trainer/gpu.yaml configs/trainer/tpu.yaml configs/trainer/cpu.yaml
  check_tuning
}

# T4, V100 and P4 (the n1 GPUs) have no bf16, which the GPU configs use: there seqcls trains
# in 16-mixed (fp16 with loss scaling). Arguments after -- that stack a GPU config must say so,
# or the job would stop at its start.
check_n1_precision() {
  local arg config stacks_gpu_config=false
  for arg in "${seqcls_args[@]}"; do
    case "$arg" in
      --trainer.precision | --trainer.precision=*) return 0 ;;
    esac
  done
  for config in "${stacked_configs[@]}"; do
    case "$config" in
      configs/trainer/gpu.yaml | configs/trainer/multinode.yaml) stacks_gpu_config=true ;;
    esac
  done
  $stacks_gpu_config || return 0
  die "$accelerator_type has no bf16, which configs/trainer/gpu.yaml and multinode.yaml use: add --trainer.precision 16-mixed after --"
}

default_seqcls_args() {
  local trainer=configs/trainer/gpu.yaml
  ((nodes == 1)) || trainer=configs/trainer/multinode.yaml
  seqcls_args=(fit --config configs/data/glue/rte.yaml --config configs/model/roberta-base.yaml
    --config "$trainer")
  if [[ "$machine_type" == n1-* ]]; then seqcls_args+=(--trainer.precision 16-mixed); fi
  seqcls_args+=(--ckpt_path last)
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
  image_spec "$reduction_server_image"
}

parse_options target_option "$@"
resolve_options
launch
