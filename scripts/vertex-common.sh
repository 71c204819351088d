# Shared by train-cloud-gpu.sh and train-cloud-tpu.sh, which source it: the options both take,
# their checks, the common parts of the Vertex AI CustomJobSpec and the gcloud call.
# A launcher sets image_name, defines target_option, check_target, default_seqcls_args and
# worker_pools, then calls: parse_options target_option "$@"; resolve_options; launch
# shellcheck shell=bash

script="$(basename "$0")"
project="${PROJECT:-}"
region="${REGION:-}"
bucket="${BUCKET:-}"
image="${IMAGE:-}"
service_account="${SERVICE_ACCOUNT:-}"
repository="${REPOSITORY:-seqcls}"
name=""
dry_run=false
spot=false
restart_workers=false
seqcls_args=()
env_names=()
env_values=()
consumed=0
# Hyper-parameter tuning (train-cloud-gpu.sh --tune N): 0 trials is a plain custom job.
tune_trials=0
tune_parallel=1
tune_option_given="" # the last of --parallel, --tune-space, ... given, for check_tuning
tune_space="" # configs/tune/space.yaml
tune_metric=val/accuracy
tune_algorithm=ALGORITHM_UNSPECIFIED
study_spec=""

# One line on stderr naming what is wrong and how to fix it, then exit 2 (a usage error).
die() {
  echo "$script: $*" >&2
  exit 2
}

# The script's header comment is its help.
usage() {
  sed -n '2,/^[^#]/{/^#/s/^# \{0,1\}//p}' "$0"
}

# Dies unless option $1 has a value ($2).
need_value() {
  [[ $# -ge 2 && -n "$2" && "$2" != --* ]] || die "$1 needs a value; see $script --help"
}

# Dies unless option $1's value $2 is a whole number >= $3.
need_count() {
  if [[ ! "$2" =~ ^[0-9]+$ ]] || (($2 < $3)); then die "$1 $2: expected a whole number >= $3"; fi
}

# add_env NAME=VALUE: one more variable for the training container (containerSpec.env).
add_env() {
  local name="${1%%=*}" value="${1#*=}" given
  [[ "$1" == *=* && "$name" =~ ^[A-Za-z_][A-Za-z0-9_]*$ ]] ||
    die "--env $1: expected NAME=VALUE with NAME of letters, digits and '_', e.g. --env NCCL_DEBUG=INFO"
  [[ "$name" != AIP_* && "$name" != CLUSTER_SPEC && "$name" != TF_CONFIG ]] ||
    die "--env $name: Vertex AI sets $name itself; leave it out"
  for given in "${env_names[@]}"; do
    [[ "$given" != "$name" ]] || die "--env $name: given twice; keep one"
  done
  # seqcls reads these when the job starts (seqcls/cloud/secrets.py): check them now.
  if [[ "$name" == SEQCLS_SECRET_* ]]; then
    [[ "$name" != SEQCLS_SECRET_ ]] ||
      die "--env $name: name the variable to set, e.g. --env SEQCLS_SECRET_HF_TOKEN=projects/PROJECT/secrets/SECRET/versions/latest"
    [[ "$value" =~ ^projects/[^/[:space:]]+/secrets/[^/[:space:]]+/versions/[^/[:space:]]+$ ]] ||
      die "--env $name=$value: expected projects/PROJECT/secrets/SECRET/versions/VERSION (VERSION may be latest)"
  elif [[ "${name^^}" =~ (TOKEN|SECRET|PASSWORD|API_?KEY)$ ]]; then
    echo "$script: warning: --env $name: its value is stored in the job spec, which anyone who can view the job reads; name a Secret Manager version instead: --env SEQCLS_SECRET_$name=projects/PROJECT/secrets/SECRET/versions/latest" >&2
  fi
  env_names+=("$name")
  env_values+=("$value")
}

# parse_options HANDLER ARGS...: the common options here, the launcher's through HANDLER, which
# sets $consumed to the number of arguments it used, or returns 1 for an unknown option.
parse_options() {
  local handler="$1"
  shift
  while (($#)); do
    # --flag=value is --flag value.
    if [[ "$1" == --?*=* ]]; then set -- "${1%%=*}" "${1#*=}" "${@:2}"; fi
    case "$1" in
      --project) need_value "$@"; project="$2"; shift 2 ;;
      --region) need_value "$@"; region="$2"; shift 2 ;;
      --bucket) need_value "$@"; bucket="$2"; shift 2 ;;
      --image) need_value "$@"; image="$2"; shift 2 ;;
      --name) need_value "$@"; name="$2"; shift 2 ;;
      --service-account) need_value "$@"; service_account="$2"; shift 2 ;;
      --env) need_value "$@"; add_env "$2"; shift 2 ;;
      --dry-run) dry_run=true; shift ;;
      -h | --help) usage; exit 0 ;;
      --) shift; seqcls_args=("$@"); break ;;
      *)
        "$handler" "$@" || die "unknown option '$1'; see $script --help (seqcls arguments go after --)"
        shift "$consumed"
        ;;
    esac
  done
}

# refuse_trainer_configs USE OTHER...: dies when the seqcls arguments stack one of the OTHER
# trainer configs, made for other machines than the launcher's: the job would stop at start.
refuse_trainer_configs() {
  local use="$1" arg other
  shift
  for arg in "${seqcls_args[@]}"; do
    for other in "$@"; do
      [[ "$arg" != "$other" ]] ||
        die "-- ... --config $arg: not for the machines $script starts; stack $use instead"
    done
  done
}

# The value of a gcloud setting, or nothing. Never called by --dry-run, which needs no gcloud.
gcloud_setting() {
  command -v gcloud >/dev/null || return 0
  gcloud config get-value "$1" 2>/dev/null || true
}

resolve_options() {
  if ! $dry_run; then
    command -v gcloud >/dev/null ||
      die "gcloud not found; install the Google Cloud CLI (or preview the job with --dry-run)"
    [[ -n "$project" ]] || project="$(gcloud_setting project)"
    [[ -n "$region" ]] || region="$(gcloud_setting ai/region)"
  fi
  [[ -n "$project" ]] ||
    die "--project is required (or PROJECT, or gcloud config set project), e.g. --project my-project"
  [[ -n "$region" ]] ||
    die "--region is required (or REGION, or gcloud config set ai/region), e.g. --region us-central1"
  [[ "$region" =~ ^[a-z]+-[a-z]+[0-9]+$ ]] ||
    die "--region $region: not a Google Cloud region, e.g. us-central1"
  [[ -n "$bucket" ]] || die "--bucket is required (gs://BUCKET), e.g. --bucket gs://my-bucket"
  [[ "$bucket" == gs://?* ]] || die "--bucket $bucket: must start with gs://, e.g. gs://my-bucket"
  bucket="${bucket%/}"
  name="${name:-$image_name-$(date -u +%Y%m%d-%H%M%S)}"
  [[ "$name" =~ ^[A-Za-z0-9][A-Za-z0-9._-]*$ ]] ||
    die "--name $name: use letters, digits, '.', '_' and '-' (it names the run's folder)"
  image="${image:-$region-docker.pkg.dev/$project/$repository/$image_name:latest}"
  [[ -n "$image" && "$image" != *[[:space:]]* ]] || die "--image '$image': expected REGION-docker.pkg.dev/PROJECT/REPOSITORY/IMAGE:TAG"
  run_dir="$bucket/runs/$name"
  check_target
  ((${#seqcls_args[@]})) || default_seqcls_args
}

# A YAML double-quoted scalar (JSON string rules), so no argument can break the spec.
yaml_string() {
  local s="$1"
  s="${s//\\/\\\\}"
  s="${s//\"/\\\"}"
  s="${s//$'\n'/\\n}"
  s="${s//$'\t'/\\t}"
  printf '"%s"' "$s"
}

# A containerSpec with an image only: $1.
image_spec() {
  echo "    containerSpec:"
  echo "      imageUri: $(yaml_string "$1")"
}

# The containerSpec of a training pool: $1 image, then its arguments; the --env variables too.
container_spec() {
  local arg i
  image_spec "$1"
  shift
  if (($#)); then
    echo "      args:"
    for arg in "$@"; do echo "        - $(yaml_string "$arg")"; done
  fi
  ((${#env_names[@]})) || return 0
  echo "      env:"
  for i in "${!env_names[@]}"; do
    echo "        - name: ${env_names[i]}"
    echo "          value: $(yaml_string "${env_values[i]}")"
  done
}

# The job's CustomJobSpec, in the camelCase field names of the Vertex AI REST API: gcloud
# reads only those, although Google's Python protos would also take snake_case.
job_spec() {
  echo "workerPoolSpecs:"
  worker_pools
  echo "baseOutputDirectory:"
  echo "  outputUriPrefix: $(yaml_string "$run_dir")"
  [[ -z "$service_account" ]] || echo "serviceAccount: $(yaml_string "$service_account")"
  scheduling
}

create_command() {
  if ((tune_trials)); then
    gcloud_command=(gcloud ai hp-tuning-jobs create --project "$project" --region "$region"
      --display-name "$name" --max-trial-count "$tune_trials"
      --parallel-trial-count "$tune_parallel" --config "$1")
    return 0
  fi
  gcloud_command=(gcloud ai custom-jobs create --project "$project" --region "$region"
    --display-name "$name" --config "$1")
}

# --tune: the counts, and the search space as the studySpec (JSON, which is YAML), made by
# seqcls/tune/vertex.py from the same file seqcls tune reads. Trials must not share a run
# directory: each writes to its own folder under baseOutputDirectory.
check_tuning() {
  if [[ "$tune_trials" == 0 ]]; then
    # Without --tune a plain job starts, and would quietly leave the option out.
    [[ -z "$tune_option_given" ]] ||
      die "$tune_option_given: only with --tune N; add --tune N or leave it out"
    return 0
  fi
  need_count --tune "$tune_trials" 1
  need_count --parallel "$tune_parallel" 1
  ((tune_parallel <= tune_trials)) ||
    die "--parallel $tune_parallel: more than the $tune_trials trials of --tune; lower it"
  case "$tune_algorithm" in
    ALGORITHM_UNSPECIFIED | GRID_SEARCH | RANDOM_SEARCH) ;;
    *) die "--tune-algorithm $tune_algorithm: one of ALGORITHM_UNSPECIFIED, GRID_SEARCH, RANDOM_SEARCH" ;;
  esac
  local arg
  for arg in "${seqcls_args[@]}"; do
    case "$arg" in
      --trainer.default_root_dir | --trainer.default_root_dir=*)
        die "--tune: leave --trainer.default_root_dir out after --; each trial writes to its own folder under $bucket/runs/$name" ;;
    esac
  done
  local repo python
  repo="$(cd "$(dirname "$0")/.." && pwd)"
  # Any Python 3.11+ with PyYAML: the repository's .venv (scripts/setup.sh), else python3.
  python="${PYTHON:-python3}"
  [[ -n "${PYTHON:-}" || ! -x "$repo/.venv/bin/python" ]] || python="$repo/.venv/bin/python"
  if ! study_spec="$(PYTHONPATH="$repo/src" "$python" -m seqcls.tune.vertex \
    "${tune_space:-$repo/configs/tune/space.yaml}" "$tune_metric" "$tune_algorithm" 2>&1)"; then
    die "${study_spec##*$'\n'}"
  fi
}

# The HyperparameterTuningJob's fields (gcloud's --config): the study, then the trial's job.
tuning_spec() {
  echo "studySpec: $study_spec"
  echo "maxTrialCount: $tune_trials"
  echo "parallelTrialCount: $tune_parallel"
  echo "trialJobSpec:"
  job_spec | sed 's/^/  /'
}

# The spec gcloud reads: a CustomJobSpec, or with --tune a HyperparameterTuningJob's fields.
spec() {
  if ((tune_trials)); then tuning_spec; else job_spec; fi
}

launch() {
  if $dry_run; then
    create_command job.yaml
    local printed kind="CustomJobSpec" where="Run directory: $run_dir"
    if ((tune_trials)); then
      kind="HyperparameterTuningJob"
      where="Run directories: $run_dir/TRIAL_ID, one per trial"
    fi
    printed="$(printf '%q ' "${gcloud_command[@]}")"
    echo "# Vertex AI $kind from $script --dry-run; to submit it, save it as job.yaml and run:"
    echo "#   ${printed% }"
    echo "# $where"
    spec
    return 0
  fi
  local spec_dir
  spec_dir="$(mktemp -d)"
  # shellcheck disable=SC2064  # expand now: spec_dir is local and gone when the trap fires
  trap "rm -rf '$spec_dir'" EXIT
  spec >"$spec_dir/job.yaml"
  create_command "$spec_dir/job.yaml"
  echo "$script: run directory $run_dir" >&2
  "${gcloud_command[@]}"
}

# Spot VMs, and for jobs of several nodes a restart of every node when one restarts: DDP cannot
# take a node back into a running job.
scheduling() {
  $spot || $restart_workers || return 0
  echo "scheduling:"
  if $spot; then echo "  strategy: SPOT"; fi
  if $restart_workers; then echo "  restartJobOnWorkerRestart: true"; fi
}
