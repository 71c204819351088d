#!/usr/bin/env bash
# Fine-tune one model on RTE, MRPC, STS-B and CoLA with seqcls and with the HF Trainer, using
# run_glue's recipe (lr 2e-5, batch 32, max length 128, 3 epochs, no warm-up, no weight decay),
# and print the dev metrics side by side.
#
#   bash benchmarks/glue.sh DATA_DIR [OUT_DIR]
#
# DATA_DIR holds RTE/, MRPC/, STS-B/ and CoLA/, each with train.csv and dev.csv whose columns
# are text[,text_pair],label (labels as in the hub's glue dataset). Environment overrides:
# MODEL (default models/all-MiniLM-L6-v2), TASKS, EPOCHS, MAX_TRAIN_SAMPLES (for a smoke run),
# SIDES (default "seqcls hf"; one side alone, e.g. to run the two on different machines).
set -euo pipefail
cd "$(dirname "$0")/.."

# The same environment as scripts/test.sh: seqcls plus the HF Trainer (bench extra).
bash scripts/setup.sh dev,bench

data="${1:?usage: bash benchmarks/glue.sh DATA_DIR [OUT_DIR]}"
out="${2:-runs/glue}"
model="${MODEL:-models/all-MiniLM-L6-v2}"
epochs="${EPOCHS:-3}"
python=.venv/bin/python
limit=()
[[ -n "${MAX_TRAIN_SAMPLES:-}" ]] && limit=(--max-train-samples "$MAX_TRAIN_SAMPLES")
seqcls_limit=()
[[ -n "${MAX_TRAIN_SAMPLES:-}" ]] && seqcls_limit=(--data.max_train_samples "$MAX_TRAIN_SAMPLES")

for task in ${TASKS:-rte mrpc stsb cola}; do
  case "$task" in
    rte) folder=RTE ;; mrpc) folder=MRPC ;; stsb) folder=STS-B ;; cola) folder=CoLA ;;
    *) echo "unknown task $task (rte, mrpc, stsb, cola)" >&2; exit 2 ;;
  esac
  pair=(--text-pair-column text_pair)
  seqcls_pair=(--data.text_pair_column text_pair)
  [[ "$task" == cola ]] && pair=() && seqcls_pair=()

  sides=" ${SIDES:-seqcls hf} "
  run="$out/seqcls/$task"
  [[ "$sides" == *" seqcls "* ]] && .venv/bin/seqcls fit --config "configs/data/glue/$task.yaml" \
    --model.model_name_or_path "$model" \
    --data.train_file "$data/$folder/train.csv" --data.validation_file "$data/$folder/dev.csv" \
    --data.text_column text "${seqcls_pair[@]}" --data.label_column label \
    --data.batch_size 32 --data.max_length 128 --model.learning_rate 2e-5 \
    --model.warmup_ratio 0 --model.weight_decay 0 --trainer.max_epochs "$epochs" \
    --trainer.enable_progress_bar false --trainer.default_root_dir "$run" "${seqcls_limit[@]}"
  # The HF Trainer reports its final epoch; score seqcls's final epoch too, beside its best.
  [[ "$sides" == *" seqcls "* ]] && .venv/bin/seqcls validate --config "$run/config.yaml" --ckpt_path "$run/checkpoints/last.ckpt" \
    --trainer.enable_progress_bar false --trainer.default_root_dir "$run/last"

  [[ "$sides" == *" hf "* ]] && "$python" benchmarks/hf_trainer_glue.py --model "$model" --task "$task" \
    --train "$data/$folder/train.csv" --validation "$data/$folder/dev.csv" \
    --text-column text "${pair[@]}" --label-column label --epochs "$epochs" \
    --out "$out/hf/$task" "${limit[@]}"
  true  # a skipped side must not end the loop under set -e
done

"$python" - "$out" <<'PY'
import json
import sys
from pathlib import Path

out = Path(sys.argv[1])
# The HF side uses the names of the `evaluate` library's glue metric.
SEQCLS_NAME = {"spearmanr": "spearman", "matthews_correlation": "matthews"}


def validation(path: Path) -> dict:
    return json.loads(path.read_text())["validation"] if path.is_file() else {}


print(f"{'task':6} {'metric':10} {'seqcls best':>12} {'seqcls last':>12} {'HF Trainer':>11}")
tasks = {p.name for side in ("seqcls", "hf") if (out / side).is_dir() for p in (out / side).iterdir()}
for task in sorted(tasks):
    best = validation(out / "seqcls" / task / "metrics.json")
    last = validation(out / "seqcls" / task / "last" / "metrics.json")
    hf_file = out / "hf" / task / "results.json"
    hf = json.loads(hf_file.read_text())["metrics"] if hf_file.is_file() else {}
    for metric in hf or {name: None for name in best if name != "loss"}:
        name = SEQCLS_NAME.get(metric, metric)
        row = [best.get(name), last.get(name), hf.get(metric)]
        cells = " ".join(f"{v:>12.4f}" if v is not None else f"{'-':>12}" for v in row)
        print(f"{task:6} {name:10} {cells}")
PY
