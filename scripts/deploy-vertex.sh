#!/usr/bin/env bash
# Serve a fitted model on Vertex AI: upload it to the Model Registry with the seqcls-serve image
# (cloudbuild.yaml builds it), then deploy it to a new endpoint or to --endpoint.
#
#   bash scripts/deploy-vertex.sh --project P --region R --model gs://B/runs/NAME/model [options]
#
# The container runs seqcls serve (docs/serving.md) on port 8080, health on /health and
# predictions on /predict; Vertex AI copies the model folder for it (AIP_STORAGE_URI).
#
#   --model gs://B/...     the model folder a fit exported (RUN_DIR/model); with --backend onnx
#                          it must hold onnx/model.onnx (seqcls export onnx RUN_DIR/model)
#   --project P            Google Cloud project (default: $PROJECT, else gcloud's project)
#   --region R             Vertex AI region, e.g. us-central1 (default: $REGION, else gcloud's ai/region)
#   --image URI            serving image (default: R-docker.pkg.dev/P/seqcls/seqcls-serve:latest,
#                          what cloudbuild.yaml pushes; $IMAGE; $REPOSITORY replaces seqcls)
#   --name NAME            the Model's ID and display name, and the new endpoint's: lowercase
#                          letters, digits and '-', from a letter, at most 63 characters
#                          (default: seqcls-serve-UTCDATE-TIME)
#   --endpoint E           deploy to this endpoint (its ID, or projects/P/locations/R/endpoints/ID)
#                          instead of a new one
#   --machine-type T       default n1-standard-4 (4 vCPUs, no GPU); CPU machines: e2, n1, n2,
#                          n2d, c2 (-standard/-highmem/-highcpu-N); GPU machines as in
#                          train-cloud-gpu.sh: a2, a3, g2 (their GPUs come with them), n1 with
#                          --accelerator-type
#   --accelerator-type A   a GPU for the machine (n1: NVIDIA_TESLA_T4, _V100 or _P4)
#   --accelerator-count C  GPUs per replica; default: what the machine type has, else 1
#   --min-replicas N       replicas always running (default 1)
#   --max-replicas M       replicas under load, at least N (default: N)
#   --backend B            onnx (ONNX Runtime on the CPU; the default without a GPU) or torch
#                          (the default with a GPU, which PyTorch then uses)
#   --service-account SA   run the replicas as this service account (default: Vertex AI's)
#   --env NAME=VALUE       set an environment variable in the serving container (repeatable)
#   --dry-run              print the Model and the DeployedModel (YAML, in the field names of the
#                          Vertex AI REST API) and the gcloud commands; call nothing
#
# Arguments after -- are seqcls serve's own, e.g. -- --max-batch-size 64 --max-wait-ms 10.
set -euo pipefail
# shellcheck source=scripts/vertex-common.sh
source "$(dirname "$0")/vertex-common.sh"
# shellcheck source=scripts/vertex-gpus.sh
source "$(dirname "$0")/vertex-gpus.sh"

model=""
endpoint=""
machine_type=n1-standard-4
accelerator_type=""
accelerator_count=""
min_replicas=1
max_replicas=""
backend=""
new_endpoint=false
serve_args=()
port=8080
health_route=/health
predict_route=/predict

while (($#)); do
  if [[ "$1" == --?*=* ]]; then set -- "${1%%=*}" "${1#*=}" "${@:2}"; fi
  case "$1" in
    --model) need_value "$@"; model="$2"; shift 2 ;;
    --project) need_value "$@"; project="$2"; shift 2 ;;
    --region) need_value "$@"; region="$2"; shift 2 ;;
    --image) need_value "$@"; image="$2"; shift 2 ;;
    --name) need_value "$@"; name="$2"; shift 2 ;;
    --endpoint) need_value "$@"; endpoint="$2"; shift 2 ;;
    --machine-type) need_value "$@"; machine_type="$2"; shift 2 ;;
    --accelerator-type) need_value "$@"; accelerator_type="$2"; shift 2 ;;
    --accelerator-count) need_value "$@"; accelerator_count="$2"; shift 2 ;;
    --min-replicas) need_value "$@"; min_replicas="$2"; shift 2 ;;
    --max-replicas) need_value "$@"; max_replicas="$2"; shift 2 ;;
    --backend) need_value "$@"; backend="$2"; shift 2 ;;
    --service-account) need_value "$@"; service_account="$2"; shift 2 ;;
    --env) need_value "$@"; add_env "$2"; shift 2 ;;
    --dry-run) dry_run=true; shift ;;
    -h | --help) usage; exit 0 ;;
    --) shift; serve_args=("$@"); break ;;
    *) die "unknown option '$1'; see $script --help (seqcls serve arguments go after --)" ;;
  esac
done

# The machine, its GPUs (none unless the machine type comes with them or --accelerator-type
# asks), and the replicas: what Vertex AI would refuse is refused here, before anything is sent.
check_machine() {
  if [[ " $known_machines " == *" $machine_type "* ]]; then
    check_gpu_pair
  elif [[ "$machine_type" =~ ^(e2|n1|n2|n2d|c2)-(standard|highmem|highcpu)-[1-9][0-9]*$ ]]; then
    if [[ -n "$accelerator_type" ]]; then
      check_gpu_pair
    elif [[ -n "$accelerator_count" ]]; then
      die "--accelerator-count $accelerator_count needs --accelerator-type; $machine_type has no GPU of its own"
    fi
  else
    die "--machine-type $machine_type: not a prediction machine type this script knows; e.g. n1-standard-4, e2-standard-8, g2-standard-8 (GPU), or n1-standard-8 with --accelerator-type NVIDIA_TESLA_T4"
  fi
  need_count --min-replicas "$min_replicas" 1
  max_replicas="${max_replicas:-$min_replicas}"
  need_count --max-replicas "$max_replicas" 1
  ((min_replicas <= max_replicas)) ||
    die "--min-replicas $min_replicas is more than --max-replicas $max_replicas; raise --max-replicas or lower --min-replicas"
}

resolve() {
  resolve_project_and_region deployment
  [[ -n "$model" ]] || die "--model is required: the model folder a fit exported, e.g. --model gs://my-bucket/runs/NAME/model"
  [[ "$model" == gs://?* ]] ||
    die "--model $model: Vertex AI reads models from Cloud Storage; give a gs:// folder, e.g. gs://my-bucket/runs/NAME/model"
  model="${model%/}"
  name="${name:-seqcls-serve-$(date -u +%Y%m%d-%H%M%S)}"
  # Vertex AI's rules for a user-chosen Model ID and endpoint ID, which --name is.
  [[ "$name" =~ ^[a-z]([a-z0-9-]{0,61}[a-z0-9])?$ ]] ||
    die "--name $name: use lowercase letters, digits and '-', from a letter, not ending in '-', at most 63 characters"
  if [[ -n "$endpoint" && ! "$endpoint" =~ ^(projects/[^/]+/locations/[^/]+/endpoints/)?[a-z0-9][a-z0-9-]*$ ]]; then
    die "--endpoint $endpoint: expected an endpoint ID or projects/PROJECT/locations/REGION/endpoints/ID"
  fi
  image="${image:-$region-docker.pkg.dev/${project/://}/$repository/seqcls-serve:latest}"
  [[ "$image" != *[[:space:]]* ]] || die "--image '$image': expected REGION-docker.pkg.dev/PROJECT/REPOSITORY/IMAGE:TAG"
  check_machine
  backend="${backend:-$([[ -n "$accelerator_type" ]] && echo torch || echo onnx)}"
  [[ "$backend" == onnx || "$backend" == torch ]] || die "--backend $backend: onnx or torch"
  local value
  # gcloud takes the container's arguments and variables as comma-separated lists.
  for value in "${serve_args[@]}" "${env_values[@]}"; do
    [[ "$value" != *,* ]] || die "'$value': gcloud's lists are comma-separated; give it without a comma"
  done
  container_args=(--host 0.0.0.0 --backend "$backend" "${serve_args[@]}")
  if [[ -z "$endpoint" ]]; then endpoint="$name" new_endpoint=true; fi
}

# The Model (models.upload): the artifact folder and how to run its container.
model_yaml() {
  local arg i
  echo "displayName: $(yaml_string "$name")"
  echo "artifactUri: $(yaml_string "$model")"
  echo "containerSpec:"
  echo "  imageUri: $(yaml_string "$image")"
  echo "  args:"
  for arg in "${container_args[@]}"; do echo "    - $(yaml_string "$arg")"; done
  if ((${#env_names[@]})); then
    echo "  env:"
    for i in "${!env_names[@]}"; do
      echo "    - name: ${env_names[i]}"
      echo "      value: $(yaml_string "${env_values[i]}")"
    done
  fi
  echo "  ports:"
  echo "    - containerPort: $port"
  echo "  predictRoute: $predict_route"
  echo "  healthRoute: $health_route"
}

# The DeployedModel (endpoints.deployModel): the Model on its machines.
deployed_model_yaml() {
  echo "model: $(yaml_string "projects/$project/locations/$region/models/$name")"
  echo "displayName: $(yaml_string "$name")"
  echo "dedicatedResources:"
  echo "  machineSpec:"
  echo "    machineType: $machine_type"
  if [[ -n "$accelerator_type" ]]; then
    echo "    acceleratorType: $accelerator_type"
    echo "    acceleratorCount: $accelerator_count"
  fi
  echo "  minReplicaCount: $min_replicas"
  echo "  maxReplicaCount: $max_replicas"
  [[ -z "$service_account" ]] || echo "serviceAccount: $(yaml_string "$service_account")"
}

commands() {
  local where=(--project "$project" --region "$region") env_list="" i
  for i in "${!env_names[@]}"; do env_list+="${env_list:+,}${env_names[i]}=${env_values[i]}"; done
  upload=(gcloud ai models upload "${where[@]}" --model-id "$name" --display-name "$name"
    --artifact-uri "$model" --container-image-uri "$image"
    --container-args "$(IFS=,; echo "${container_args[*]}")" --container-ports "$port"
    --container-health-route "$health_route" --container-predict-route "$predict_route")
  [[ -z "$env_list" ]] || upload+=(--container-env-vars "$env_list")
  create=()
  if $new_endpoint; then
    create=(gcloud ai endpoints create "${where[@]}" --endpoint-id "$name" --display-name "$name")
  fi
  deploy=(gcloud ai endpoints deploy-model "${endpoint##*/}" "${where[@]}" --model "$name"
    --display-name "$name" --machine-type "$machine_type"
    --min-replica-count "$min_replicas" --max-replica-count "$max_replicas" --traffic-split "0=100")
  if [[ -n "$accelerator_type" ]]; then
    local gpu="${accelerator_type,,}"
    deploy+=(--accelerator "type=${gpu//_/-},count=$accelerator_count")
  fi
  [[ -z "$service_account" ]] || deploy+=(--service-account "$service_account")
}

shown() {
  local printed
  printed="$(printf '%q ' "$@")"
  echo "#   ${printed% }"
}

resolve
commands
if $dry_run; then
  echo "# Vertex AI Model and DeployedModel from $script --dry-run; to send them, run:"
  shown "${upload[@]}"
  if ((${#create[@]})); then shown "${create[@]}"; fi
  shown "${deploy[@]}"
  echo "---"
  model_yaml
  echo "---"
  deployed_model_yaml
  exit 0
fi
"${upload[@]}"
if ((${#create[@]})); then "${create[@]}"; fi
"${deploy[@]}"
echo "$script: deployed $name to endpoint ${endpoint##*/} in $region" >&2
