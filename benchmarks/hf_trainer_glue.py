"""Fine-tune a sequence classifier on a GLUE task with the Hugging Face ``Trainer``.

Follows the recipe and defaults of transformers' ``examples/pytorch/text-classification/
run_glue.py``: ``AutoModelForSequenceClassification``, learning rate 2e-5, per-device batch 32,
max length 128 (pairs truncated ``longest_first``, i.e. ``truncation=True``), 3 epochs, linear
schedule without warm-up, weight decay 0, seed 42, fp32; ``--max-train-samples N`` keeps the first
N training rows. Evaluates once on the validation file after training, with the GLUE metric(s):

    rte: accuracy    mrpc: accuracy, F1 of label 1    stsb: Pearson, Spearman    cola: Matthews

Padding: run_glue pads every example to the max length (``--padding max_length``). The default
here, ``--padding longest``, pads each batch to its longest example (``DataCollatorWithPadding``):
padding is masked out, so it changes the speed, not the metric.

Input files are CSV with a header. Class labels get ids in the sorted order of the distinct
training labels (as run_glue does for CSV files); STS-B is regression on float scores.

Usage:

    HF_HUB_OFFLINE=1 python benchmarks/hf_trainer_glue.py --model MODEL_DIR \\
        --train train.csv --validation dev.csv --text-column text [--text-pair-column text_pair] \\
        --label-column label --task {rte,mrpc,stsb,cola} --out OUT_DIR \\
        [--epochs 3] [--max-train-samples N] [--padding {longest,max_length}]

Writes ``OUT_DIR/results.json`` (metrics, train runtime, train examples/s, the command); no
checkpoints are saved and no experiment trackers are used.
"""

from __future__ import annotations

import argparse
import csv
import json
import shlex
import sys
from pathlib import Path
from typing import Any

import numpy as np
import torch
import torchmetrics.functional as tmf
from datasets import Dataset
from transformers import (
    AutoConfig,
    AutoModelForSequenceClassification,
    AutoTokenizer,
    DataCollatorWithPadding,
    PreTrainedTokenizerBase,
    Trainer,
    TrainingArguments,
    default_data_collator,
    set_seed,
)

TASKS = ("rte", "mrpc", "stsb", "cola")
MAX_LENGTH = 128
SEED = 42


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--model", required=True, help="local model directory (or hub name)")
    p.add_argument("--train", type=Path, required=True, help="training CSV file")
    p.add_argument("--validation", type=Path, required=True, help="validation CSV file")
    p.add_argument("--text-column", required=True)
    p.add_argument("--text-pair-column", default=None)
    p.add_argument("--label-column", required=True)
    p.add_argument("--task", choices=TASKS, required=True)
    p.add_argument("--out", type=Path, required=True, help="output directory")
    p.add_argument("--epochs", type=float, default=3.0)
    p.add_argument("--max-train-samples", type=int, default=None)
    p.add_argument("--padding", choices=("longest", "max_length"), default="longest")
    return p.parse_args(argv)


def read_csv(path: Path, columns: list[str]) -> dict[str, list[str]]:
    """Read the given columns of a CSV file as strings (no type guessing, no NA parsing)."""
    with path.open(newline="", encoding="utf-8-sig") as f:
        rows = list(csv.DictReader(f))
    missing = [c for c in columns if rows and c not in rows[0]]
    if missing:
        raise SystemExit(f"{path}: missing column(s) {missing}; has {list(rows[0])}")
    return {c: [row[c] for row in rows] for c in columns}


def label_ids(raw: list[str], is_regression: bool, label_list: list[str]) -> list[Any]:
    if is_regression:
        return [float(x) for x in raw]
    index = {label: i for i, label in enumerate(label_list)}
    unknown = sorted(set(raw) - index.keys())
    if unknown:
        raise SystemExit(f"labels {unknown} are not in the training labels {label_list}")
    return [index[x] for x in raw]


def sort_labels(labels: set[str]) -> list[str]:
    """Sorted distinct labels, numerically when they are all integers (so "10" follows "9")."""
    try:
        return sorted(labels, key=int)
    except ValueError:
        return sorted(labels)


def glue_metrics(task: str, predictions: np.ndarray, labels: np.ndarray) -> dict[str, float]:
    """The GLUE metric(s) of ``task``, as the ``glue`` metric of ``evaluate`` computes them."""
    if task == "stsb":
        scores = torch.as_tensor(np.squeeze(predictions, axis=-1), dtype=torch.float64)
        gold = torch.as_tensor(labels, dtype=torch.float64)
        return {
            "pearson": float(tmf.pearson_corrcoef(scores, gold)),
            "spearmanr": float(tmf.spearman_corrcoef(scores, gold)),
        }
    preds, target = np.argmax(predictions, axis=1), labels.astype(np.int64)
    tp = float(np.sum((preds == 1) & (target == 1)))
    tn = float(np.sum((preds == 0) & (target == 0)))
    fp = float(np.sum((preds == 1) & (target == 0)))
    fn = float(np.sum((preds == 0) & (target == 1)))
    if task == "cola":  # Matthews correlation; 0 when a row or column of the confusion is empty
        denominator = np.sqrt((tp + fp) * (tp + fn) * (tn + fp) * (tn + fn))
        mcc = (tp * tn - fp * fn) / denominator if denominator else 0.0
        return {"matthews_correlation": float(mcc)}
    result = {"accuracy": float(np.mean(preds == target))}
    if task == "mrpc":  # F1 of the positive class (label 1)
        result["f1"] = 2 * tp / (2 * tp + fp + fn) if tp + fp + fn else 0.0
    return result


def main(argv: list[str] | None = None) -> None:
    args = parse_args(argv)
    is_regression = args.task == "stsb"
    text_columns = [args.text_column] + ([args.text_pair_column] if args.text_pair_column else [])
    columns = [*text_columns, args.label_column]
    train_raw = read_csv(args.train, columns)
    val_raw = read_csv(args.validation, columns)
    if args.max_train_samples is not None:
        train_raw = {c: v[: args.max_train_samples] for c, v in train_raw.items()}

    label_list = [] if is_regression else sort_labels(set(train_raw[args.label_column]))
    num_labels = 1 if is_regression else len(label_list)

    set_seed(SEED)  # before the model is built: seeds the new classification head
    config = AutoConfig.from_pretrained(
        args.model, num_labels=num_labels, finetuning_task=args.task
    )
    if not is_regression:
        config.label2id = {label: i for i, label in enumerate(label_list)}
        config.id2label = dict(enumerate(label_list))
    tokenizer: PreTrainedTokenizerBase = AutoTokenizer.from_pretrained(args.model)
    model = AutoModelForSequenceClassification.from_pretrained(
        args.model, config=config, dtype=torch.float32
    )
    max_length = min(MAX_LENGTH, tokenizer.model_max_length)
    padding = "max_length" if args.padding == "max_length" else False  # "longest": per batch

    def encode(raw: dict[str, list[str]]) -> Dataset:
        texts = [raw[c] for c in text_columns]
        enc = tokenizer(*texts, padding=padding, max_length=max_length, truncation=True)
        data = dict(enc)
        data["label"] = label_ids(raw[args.label_column], is_regression, label_list)
        return Dataset.from_dict(data)

    train_dataset, eval_dataset = encode(train_raw), encode(val_raw)

    training_args = TrainingArguments(
        output_dir=str(args.out),
        learning_rate=2e-5,
        per_device_train_batch_size=32,
        per_device_eval_batch_size=8,
        num_train_epochs=args.epochs,
        lr_scheduler_type="linear",
        warmup_steps=0,
        weight_decay=0.0,
        seed=SEED,
        fp16=False,
        bf16=False,
        eval_strategy="no",
        save_strategy="no",
        report_to="none",
        logging_strategy="steps",
        logging_steps=50,
        disable_tqdm=True,
    )

    collator = (
        default_data_collator
        if args.padding == "max_length"
        else DataCollatorWithPadding(tokenizer)
    )
    trainer = Trainer(
        model=model,
        args=training_args,
        train_dataset=train_dataset,
        processing_class=tokenizer,
        data_collator=collator,
    )

    train_metrics = trainer.train().metrics
    prediction = trainer.predict(eval_dataset)
    logits, labels = np.asarray(prediction.predictions), np.asarray(prediction.label_ids)
    metrics = glue_metrics(args.task, logits, labels)
    results = {
        "task": args.task,
        "metrics": metrics,
        "eval_loss": (prediction.metrics or {}).get("test_loss"),
        "train_runtime_s": train_metrics["train_runtime"],
        "train_examples_per_s": train_metrics["train_samples_per_second"],
        "train_examples": len(train_dataset),
        "eval_examples": len(eval_dataset),
        "epochs": args.epochs,
        "padding": args.padding,
        "torch_threads": torch.get_num_threads(),
        "command": shlex.join([sys.executable, *sys.argv]),
    }
    args.out.mkdir(parents=True, exist_ok=True)
    (args.out / "results.json").write_text(json.dumps(results, indent=2) + "\n")
    print(f"{args.task}: " + ", ".join(f"{k}={v:.4f}" for k, v in metrics.items()))
    runtime, speed = results["train_runtime_s"], results["train_examples_per_s"]
    print(f"train_runtime={runtime:.1f}s, train examples/s={speed:.1f}")
    print(f"wrote {args.out / 'results.json'}")


if __name__ == "__main__":
    main()
