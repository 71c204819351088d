# Sourced by the launchers that put GPUs on Vertex AI machines (train-cloud-gpu.sh,
# deploy-vertex.sh): which GPUs each machine type carries, how many, and the check of a pair.
# They set machine_type, accelerator_type and accelerator_count, then call check_gpu_pair.
# shellcheck shell=bash

known_gpus="NVIDIA_TESLA_A100 NVIDIA_A100_80GB NVIDIA_H100_80GB NVIDIA_H100_MEGA_80GB NVIDIA_H200_141GB NVIDIA_L4 NVIDIA_TESLA_T4 NVIDIA_TESLA_V100 NVIDIA_TESLA_P4"

# The GPU machine types Vertex AI offers; n1 takes any size (n1-standard-8).
# shellcheck disable=SC2034  # read by the launchers that source this file
known_machines="$(echo a2-highgpu-{1,2,4,8}g a2-megagpu-16g a2-ultragpu-{1,2,4,8}g \
  a3-highgpu-{1,2,4,8}g a3-megagpu-8g a3-ultragpu-8g g2-standard-{4,8,12,16,24,32,48,96})"

# The GPUs a machine family carries, the default first. Vertex AI rejects other pairs.
machine_gpus() {
  case "$1" in
    a2-highgpu-* | a2-megagpu-*) echo NVIDIA_TESLA_A100 ;;
    a2-ultragpu-*) echo NVIDIA_A100_80GB ;;
    a3-highgpu-*) echo NVIDIA_H100_80GB ;;
    a3-megagpu-*) echo NVIDIA_H100_MEGA_80GB ;;
    a3-ultragpu-*) echo NVIDIA_H200_141GB ;;
    g2-*) echo NVIDIA_L4 ;;
    n1-*) echo NVIDIA_TESLA_T4 NVIDIA_TESLA_V100 NVIDIA_TESLA_P4 ;;
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
    NVIDIA_TESLA_T4 | NVIDIA_TESLA_V100 | NVIDIA_TESLA_P4) echo "n1-*" ;;
  esac
}

# The GPUs per node that a machine type comes with: a2/a3 say it in the name (a2-highgpu-4g),
# g2 by its size; n1 machines take a count of their own (see n1_gpu_counts).
machine_gpu_count() {
  case "$1" in
    a2-* | a3-*) [[ "$1" =~ -([0-9]+)g$ ]] && echo "${BASH_REMATCH[1]}" ;;
    g2-standard-24) echo 2 ;;
    g2-standard-48) echo 4 ;;
    g2-standard-96) echo 8 ;;
    g2-*) echo 1 ;;
  esac
}

# The counts of each GPU that Vertex AI attaches to an n1 machine.
n1_gpu_counts() {
  case "$1" in
    NVIDIA_TESLA_V100) echo 1 2 4 8 ;;
    *) echo 1 2 4 ;;
  esac
}

# Fills in accelerator_type and accelerator_count from machine_type where they are not given
# (the machine's first GPU; the count it comes with, else 1), and dies on a pair or a count that
# Vertex AI refuses.
# shellcheck disable=SC2154  # machine_type is the sourcing launcher's
check_gpu_pair() {
  local gpus fixed_count
  gpus="$(machine_gpus "$machine_type")"
  accelerator_type="${accelerator_type:-${gpus%% *}}"
  if [[ " $gpus " != *" $accelerator_type "* ]]; then
    local fits
    fits="$(gpu_machines "$accelerator_type")"
    [[ -n "$fits" ]] ||
      die "--accelerator-type $accelerator_type: unknown; one of ${known_gpus// /, }"
    [[ -n "$gpus" ]] ||
      die "--accelerator-type $accelerator_type: --machine-type $machine_type takes no GPU; for $accelerator_type use $fits"
    die "--accelerator-type $accelerator_type does not fit --machine-type $machine_type, which carries ${gpus// /, }; for $accelerator_type use $fits"
  fi
  fixed_count="$(machine_gpu_count "$machine_type")"
  accelerator_count="${accelerator_count:-${fixed_count:-1}}"
  need_count --accelerator-count "$accelerator_count" 1
  [[ -z "$fixed_count" || "$accelerator_count" == "$fixed_count" ]] ||
    die "--accelerator-count $accelerator_count: $machine_type comes with $fixed_count GPU(s); leave the count out or pick another machine type"
  if [[ "$machine_type" == n1-* ]]; then
    local counts
    counts="$(n1_gpu_counts "$accelerator_type")"
    if [[ " $counts " != *" $accelerator_count "* ]]; then
      counts="${counts// /, }"
      die "--accelerator-count $accelerator_count: an n1 machine takes ${counts%, *} or ${counts##*, } $accelerator_type"
    fi
  fi
}
