# Shared by train-cloud-gpu.sh and train-cloud-tpu.sh, which source it: the options both take,
# their checks, the common parts of the Vertex AI CustomJobSpec and the gcloud call.
# A launcher sets image_name, defines target_option, check_target, default_seqcls_args and
# worker_pools, then calls: parse_options target_option "$@"; resolve_options; launch
# shellcheck shell=bash

script="$(basename "$0")"
repo="$(cd "$(dirname "$0")/.." && pwd)"
# shellcheck source=scripts/container-paths.sh
source "$repo/scripts/container-paths.sh"
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
tune_metric="" # empty: the one that picks the best checkpoint (seqcls/tune/vertex.py)
tune_algorithm=ALGORITHM_UNSPECIFIED
study_spec=""
# From the seqcls arguments (scan_seqcls_args): the --config files as the container names them,
# in order; what seqcls.tune.vertex reads the data's metrics from; the run directory they set.
stacked_configs=()
data_sources=()
root_dir=""
root_dir_from=""

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

# Dies unless option $1's value $2 is a whole number >= $3. In decimal without leading zeros:
# bash reads 010 as octal 8 and 08 not at all, and so does gcloud's YAML 1.1 in the spec.
need_count() {
  if [[ ! "$2" =~ ^(0|[1-9][0-9]{0,8})$ ]] || (($2 < $3)); then
    die "$1 $2: expected a whole number >= $3, in decimal without leading zeros"
  fi
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

# A --config path as the container names it, relative to its working directory (the
# repository's root): ./configs/x.yaml, REPO/configs/x.yaml and /app/configs/x.yaml (the
# images' WORKDIR) are configs/x.yaml, so the checks below see every spelling of a file.
container_path() {
  local path="$1"
  if [[ "$path" == "$repo"/* ]]; then path="${path#"$repo"/}"; fi
  if [[ "$path" == /app/* ]]; then path="${path#/app/}"; fi
  while [[ "$path" == ./* ]]; do path="${path#./}"; done
  while [[ "$path" == */./* ]]; do path="${path//\/.\//\/}"; done
  echo "$path"
}

# The Python that reads YAML for the launchers: any Python 3.11+ with PyYAML, the repository's
# .venv (scripts/setup.sh) first, else python3; PYTHON overrides both.
python_command() {
  if [[ -n "${PYTHON:-}" ]]; then
    echo "$PYTHON"
  elif [[ -x "$repo/.venv/bin/python" ]]; then
    echo "$repo/.venv/bin/python"
  else
    echo python3
  fi
}

# seqcls.tune.vertex ARGS: its output, or die with its one-line error (the last line, should
# Python itself fail, e.g. without PyYAML).
vertex_py() {
  local output python
  python="$(python_command)"
  if ! output="$(PYTHONPATH="$repo/src" "$python" -m seqcls.tune.vertex "$@" 2>&1)"; then
    die "${output##*$'\n'}"
  fi
  echo "$output"
}

# Reads the seqcls arguments, in order, for what the checks need: the --config files (any of
# --config F, --config=F, -c F), the data settings that name the metrics, the files the
# container reads (container-paths.sh) and the run directory (a later one overrides an earlier
# one, as in seqcls). A config file of the repository is read with Python only when it
# mentions default_root_dir or a key of those files, so most launches need no Python at all;
# a file that is not here (gs://) is passed over.
scan_seqcls_args() {
  local i arg flag value file
  for ((i = 0; i < ${#seqcls_args[@]}; i++)); do
    arg="${seqcls_args[i]}"
    case "$arg" in
      --config=* | --trainer.default_root_dir=* | --data.*=* | --model.model_name_or_path=* | --ckpt_path=*)
        flag="${arg%%=*}" value="${arg#*=}"
        ;;
      --config | -c | --trainer.default_root_dir | --data.* | --model.model_name_or_path | --ckpt_path)
        flag="$arg" value="${seqcls_args[i + 1]:-}"
        i=$((i + 1))
        ;;
      *) continue ;;
    esac
    case "$flag" in
      --config | -c)
        value="$(container_path "$value")"
        stacked_configs+=("$value")
        file="$value"
        [[ "$file" == /* ]] || file="$repo/$file"
        [[ "$value" != *://* && -f "$file" ]] || continue
        # Named from where the launcher runs, usually the repository's root, in messages.
        file="${file#"$PWD"/}"
        data_sources+=("$file")
        if grep -q default_root_dir "$file"; then
          value="$(vertex_py --get trainer.default_root_dir "$file")"
          if [[ -n "$value" ]]; then root_dir="$value" root_dir_from="--config ${stacked_configs[-1]}"; fi
        fi
        read_config "$file" "${stacked_configs[-1]}"
        ;;
      --trainer.default_root_dir)
        root_dir="$value" root_dir_from="$flag"
        [[ "$value" != null ]] || root_dir=""
        ;;
      --data.metrics | --data.problem_type | --data.validation_split | --data.validation_file)
        data_sources+=("$flag=$value")
        ;;&
      --data.train_file | --data.validation_file | --data.test_file | --data.predict_file | \
        --model.model_name_or_path | --ckpt_path)
        read_flag "$flag" "$value"
        ;;
    esac
  done
}

# refuse_trainer_configs USE OTHER...: dies when the seqcls arguments stack one of the OTHER
# trainer configs, made for other machines than the launcher's: the job would stop at start.
refuse_trainer_configs() {
  local use="$1" config other
  shift
  for config in "${stacked_configs[@]}"; do
    for other in "$@"; do
      [[ "$config" != "$other" ]] ||
        die "-- ... --config $config: not for the machines $script starts; stack $use instead"
    done
  done
}

# A run directory chosen in the seqcls arguments overrides the job's baseOutputDirectory
# (AIP_*): a local one is the container's disk, gone when the job ends; a gs:// one is where
# the run lands, so the launcher names it. A tuning job's trials need one folder each.
check_run_dir() {
  [[ -n "$root_dir" ]] || return 0
  local given="-- ... $root_dir_from $root_dir"
  [[ "$root_dir_from" == --trainer.* ]] || given="-- ... $root_dir_from: it sets trainer.default_root_dir $root_dir"
  if [[ "$tune_trials" != 0 ]]; then
    [[ "$root_dir_from" == --trainer.* ]] ||
      die "--tune: $given; each trial writes to its own folder under $bucket/runs/$name: stack a config without it"
    die "--tune: leave --trainer.default_root_dir out after --; each trial writes to its own folder under $bucket/runs/$name"
  fi
  [[ "$root_dir" == gs://?* ]] ||
    die "$given, the container's own disk, lost when the job ends; the launcher sets the run directory under --bucket ($run_dir): leave it out"
  run_dir_shown="$root_dir"
}

# The value of a gcloud setting, or nothing. Never called by --dry-run, which needs no gcloud.
gcloud_setting() {
  command -v gcloud >/dev/null || return 0
  gcloud config get-value "$1" 2>/dev/null || true
}

# The project and region: given, else gcloud's settings (never read by --dry-run); both checked.
# $1 says what --dry-run previews, for the message when gcloud is missing.
resolve_project_and_region() {
  if ! $dry_run; then
    command -v gcloud >/dev/null ||
      die "gcloud not found; install the Google Cloud CLI (or preview the $1 with --dry-run)"
    [[ -n "$project" ]] || project="$(gcloud_setting project)"
    [[ -n "$region" ]] || region="$(gcloud_setting ai/region)"
  fi
  # --dry-run reads no gcloud setting: name only what works there.
  local or_project="PROJECT, or gcloud config set project" or_region="REGION, or gcloud config set ai/region"
  if $dry_run; then or_project=PROJECT or_region=REGION; fi
  [[ -n "$project" ]] || die "--project is required (or $or_project), e.g. --project my-project"
  # Google's rule: 6 to 30 lowercase letters, digits and hyphens, from a letter, not ending in
  # a hyphen; a domain-scoped project (example.com:my-project) has its domain in front.
  [[ "$project" =~ ^([a-z0-9.-]+\.[a-z]+:)?[a-z][a-z0-9-]{4,28}[a-z0-9]$ ]] ||
    die "--project $project: not a Google Cloud project ID (6-30 lowercase letters, digits and hyphens, from a letter; or DOMAIN:ID), e.g. --project my-project"
  [[ -n "$region" ]] || die "--region is required (or $or_region), e.g. --region us-central1"
  [[ "$region" =~ ^[a-z]+-[a-z]+[0-9]+$ ]] ||
    die "--region $region: not a Google Cloud region, e.g. us-central1"
}

resolve_options() {
  resolve_project_and_region job
  [[ -n "$bucket" ]] || die "--bucket is required (gs://BUCKET), e.g. --bucket gs://my-bucket"
  [[ "$bucket" == gs://?* ]] || die "--bucket $bucket: must start with gs://, e.g. gs://my-bucket"
  bucket="${bucket%/}"
  name="${name:-$image_name-$(date -u +%Y%m%d-%H%M%S)}"
  [[ "$name" =~ ^[A-Za-z0-9][A-Za-z0-9._-]*$ ]] ||
    die "--name $name: use letters, digits, '.', '_' and '-' (it names the run's folder)"
  # Vertex AI's limit for a job's displayName.
  ((${#name} <= 128)) || die "--name: ${#name} characters; Vertex AI takes at most 128"
  # Artifact Registry names a domain-scoped project DOMAIN/ID in an image's path.
  image="${image:-$region-docker.pkg.dev/${project/://}/$repository/$image_name:latest}"
  [[ -n "$image" && "$image" != *[[:space:]]* ]] || die "--image '$image': expected REGION-docker.pkg.dev/PROJECT/REPOSITORY/IMAGE:TAG"
  run_dir="$bucket/runs/$name"
  run_dir_shown="$run_dir"
  scan_seqcls_args
  check_target
  check_run_dir
  check_container_paths "$bucket" "${stacked_configs[@]}"
  ((${#seqcls_args[@]})) || default_seqcls_args
}

# A YAML double-quoted scalar (JSON string rules), so no argument can break the spec.
yaml_string() {
  local s="$1"
  s="${s//\\/\\\\}"
  s="${s//\"/\\\"}"
  s="${s//$'\n'/\\n}"
  s="${s//$'\t'/\\t}"
  s="${s//$'\r'/\\r}"
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
  local space="${tune_space:-$repo/configs/tune/space.yaml}"
  # The default arguments stack GLUE RTE, whose metric is the default's (val/accuracy).
  study_spec="$(vertex_py "${space#"$PWD"/}" "$tune_metric" "$tune_algorithm" "${data_sources[@]}")"
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
    local printed kind="CustomJobSpec" where="Run directory: $run_dir_shown"
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
  echo "$script: run directory $run_dir_shown" >&2
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
