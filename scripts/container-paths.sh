# What a Vertex AI training container can read, for the launchers (vertex-common.sh sources
# it): the paths that seqcls arguments name must be in the image or in a bucket, or the job
# would start on a machine that has none of the user's files and stop there.
# shellcheck shell=bash

# The repository the images are built from, and the folders of it that they hold (the
# Dockerfile's COPY lines).
image_source="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
image_folders=(configs src)
# The seqcls keys whose values the container reads as files or folders.
read_keys=(data.train_file data.validation_file data.test_file data.predict_file
  model.model_name_or_path ckpt_path)
# Each key's value, as the last --config or flag that set it leaves it, and who set it.
declare -A read_values=() read_from=()

# read_flag FLAG VALUE: a seqcls flag that names a file the container reads.
read_flag() {
  read_values[${1#--}]="$2"
  read_from[${1#--}]="$1 $2"
}

# read_config FILE SHOWN: the keys of read_keys that config file FILE (--config SHOWN) sets;
# read with Python only for the keys whose name the file mentions.
read_config() {
  local key value
  for key in "${read_keys[@]}"; do
    grep -q "${key##*.}" "$1" || continue
    value="$(vertex_py --get "$key" "$1")"
    [[ -n "$value" ]] || continue
    read_values[$key]="$value"
    read_from[$key]="--config $2: it sets $key $value"
  done
}

# True when the training image holds $1: a file or folder of the repository in image_folders.
in_image() {
  local path folder
  path="$(container_path "$1")"
  for folder in "${image_folders[@]}"; do
    if [[ "$path" == "$folder"/* && -e "$image_source/$path" ]]; then return 0; fi
  done
  return 1
}

# True for what the container reads from elsewhere: a URL (gs://), or a bucket that Vertex AI
# mounts with Cloud Storage FUSE (/gcs/BUCKET/...).
remote_path() {
  [[ "$1" == *://* || "$1" == /gcs/?* ]]
}

# True for a Hugging Face Hub id (roberta-base, org/name): one or two names, the first of
# which is no file or folder here, where seqcls would read the value as a path.
hub_id() {
  [[ "$1" =~ ^[A-Za-z0-9][A-Za-z0-9._-]*(/[A-Za-z0-9][A-Za-z0-9._-]*)?$ && ! -e "${1%%/*}" ]]
}

# check_container_paths BUCKET CONFIG...: dies at the first stacked config file or path read
# by the container that only this machine has, naming its upload to BUCKET.
check_container_paths() {
  local bucket="$1" config key value from folder upload held="${image_folders[*]/%//}"
  shift
  held="not in the training image, which holds only ${held// / and } of the repository"
  for config in "$@"; do
    remote_path "$config" || in_image "$config" ||
      die "-- ... --config $config, $held; upload it (gcloud storage cp $config $bucket/configs/) and give $bucket/configs/${config##*/}"
  done
  for key in "${read_keys[@]}"; do
    value="${read_values[$key]:-}"
    case "$key=$value" in
      *= | *=null | ckpt_path=last | ckpt_path=best | ckpt_path=hpc | ckpt_path=registry) continue ;;
    esac
    if remote_path "$value" || in_image "$value"; then continue; fi
    from="-- ... ${read_from[$key]}"
    value="${value%/}"
    if [[ "$key" == model.* ]]; then
      ! hub_id "$value" || continue
      upload="upload the folder (gcloud storage cp --recursive $value $bucket/models) and give $bucket/models/${value##*/}, or give a hub id"
    else
      folder=data
      [[ "$key" != ckpt_path ]] || folder=checkpoints
      upload="upload it (gcloud storage cp $value $bucket/$folder/) and give $bucket/$folder/${value##*/}"
    fi
    [[ "$from" != *": it sets "* ]] || upload="$upload with --$key"
    die "$from, $held; $upload"
  done
}
