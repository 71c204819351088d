"""The HF Trainer's side of ``compare`` and ``glue``, set up as run_glue.py sets it up.

transformers' ``examples/pytorch/text-classification/run_glue.py``: the data is read with
``datasets.load_dataset`` (files with the options seqcls reads them with, so both sides see
the same rows) and every row tokenized with ``map`` (cached by datasets), then the first
``max_train_samples`` rows are kept; ``AutoModelForSequenceClassification``, linear schedule,
seed set before the model is built. Padding is run_glue's ``--pad_to_max_length``
(``max_length``) or dynamic (``DataCollatorWithPadding``); grouping by length is
``train_sampling_strategy="group_by_length"``. Class labels are the dataset's ClassLabel
names or the sorted distinct training labels; STS-B is regression. The steps are timed by the
same ``StepClock`` as seqcls's, and the validation set is scored with the task's GLUE
metrics, under seqcls's names for them (accuracy when there is no task).

A side with ``flatten`` is transformers' padding-free training: ``DataCollatorWithFlattening``
joins a batch's rows into one, which is exact only under flash-attention's variable-length
kernel (SDPA would let every token attend across the joined rows). Where that cannot run,
the side returns ``{"skipped": why}`` instead of results.
"""

import csv
import tempfile
from typing import Any

import datasets
import numpy as np
import torch
import torchmetrics.functional as tmf
from harness import StepClock
from machine import peak_rss_mib
from transformers import (
    AutoModelForSequenceClassification,
    AutoTokenizer,
    DataCollatorWithFlattening,
    DataCollatorWithPadding,
    Trainer,
    TrainerCallback,
    TrainingArguments,
    default_data_collator,
    set_seed,
)
from transformers.utils import is_flash_attn_2_available

# File suffix -> datasets builder and its options: those seqcls's table reader uses.
READERS: dict[str, tuple[str, dict[str, Any]]] = {
    "csv": ("csv", {}),
    "tsv": ("csv", {"delimiter": "\t", "quoting": csv.QUOTE_NONE}),
    "json": ("json", {}),
    "jsonl": ("json", {}),
}


class ClockCallback(TrainerCallback):
    """Tells a ``StepClock`` when each optimizer step begins and ends."""

    def __init__(self, clock: StepClock) -> None:
        self.clock = clock

    def on_step_begin(self, args: Any, state: Any, control: Any, **kwargs: Any) -> None:
        self.clock.begin(state.global_step)

    def on_step_end(self, args: Any, state: Any, control: Any, **kwargs: Any) -> None:
        self.clock.end()


def load(spec: dict[str, Any]) -> datasets.DatasetDict:
    if spec["dataset"]:
        return datasets.load_dataset(spec["dataset"], spec["dataset_config"])
    files = {"train": spec["train"], "validation": spec["validation"]}
    suffix = spec["train"].rsplit(".", 1)[-1]
    if suffix not in READERS:
        raise SystemExit(f"--train: {spec['train']}: give a .csv, .tsv, .json or .jsonl file")
    builder, options = READERS[suffix]
    return datasets.load_dataset(builder, data_files=files, **options)


def scores(task: str | None, predictions: np.ndarray, labels: np.ndarray) -> dict[str, float]:
    """The GLUE metric(s) of ``task`` on the validation predictions; accuracy without a task."""
    if task == "stsb":
        predicted = torch.as_tensor(np.squeeze(predictions, axis=-1), dtype=torch.float64)
        gold = torch.as_tensor(labels, dtype=torch.float64)
        return {
            "pearson": float(tmf.pearson_corrcoef(predicted, gold)),
            "spearman": float(tmf.spearman_corrcoef(predicted, gold)),
        }
    preds, target = np.argmax(predictions, axis=1), labels.astype(np.int64)
    tp = float(np.sum((preds == 1) & (target == 1)))
    tn = float(np.sum((preds == 0) & (target == 0)))
    fp = float(np.sum((preds == 1) & (target == 0)))
    fn = float(np.sum((preds == 0) & (target == 1)))
    if task == "cola":  # Matthews correlation; 0 when a row or column of the confusion is empty
        denominator = np.sqrt((tp + fp) * (tp + fn) * (tn + fp) * (tn + fn))
        return {"matthews": float((tp * tn - fp * fn) / denominator if denominator else 0.0)}
    result = {"accuracy": float(np.mean(preds == target))}
    if task == "mrpc":  # F1 of the positive class (label 1)
        result["f1"] = 2 * tp / (2 * tp + fp + fn) if tp + fp + fn else 0.0
    return result


def flattening_refusal() -> str | None:
    """Why padding-free batches cannot run here, or None where they can be tried."""
    if not torch.cuda.is_available():
        return "padding-free batches need flash-attention on a CUDA GPU; there is none here"
    if not is_flash_attn_2_available():
        return "padding-free batches need flash-attention; the flash-attn package is missing"
    return None


def first_batch_refusal(model: Any, train: datasets.Dataset) -> str | None:
    """Why a flattened batch of the first rows fails in ``model``'s forward, or None."""
    batch = DataCollatorWithFlattening()([train[i] for i in range(min(2, len(train)))])
    try:
        with torch.autocast("cuda", dtype=torch.bfloat16):
            model.to("cuda")(**{key: value.to("cuda") for key, value in batch.items()})
    except Exception as error:  # any failure means the side cannot run; say which in one line
        line = str(error).strip().splitlines()[0] if str(error).strip() else ""
        return f"a flattened batch failed in the model: {type(error).__name__}: {line}"
    return None


def worker(spec: dict[str, Any]) -> dict[str, Any]:
    """Train (``steps`` optimizer steps, or ``epochs``) and score, inside a side's process."""
    side, clock = spec["side"], StepClock(spec["warmup_steps"])
    if side.get("flatten") and (refusal := flattening_refusal()):
        return {"skipped": refusal}
    if side.get("matmul_precision"):
        torch.set_float32_matmul_precision(side["matmul_precision"])
    raw = load(spec)
    label, regression = spec["label_column"], spec["task"] == "stsb"
    feature = raw["train"].features[label]
    names = feature.names if isinstance(feature, datasets.ClassLabel) else None
    labels = [] if regression else names or sorted(set(raw["train"][label]))
    label_id = {name: i for i, name in enumerate(labels)}
    if not (regression or names):
        unknown = sorted(set(raw["validation"][label]) - label_id.keys(), key=str)
        if unknown:
            raise SystemExit(f"validation labels {unknown} are not among the training's {labels}")
    tokenizer = AutoTokenizer.from_pretrained(spec["model"])
    padding = "max_length" if side["padding"] == "max_length" else False
    text, pair = spec["text_column"], spec["text_pair_column"]

    def preprocess(rows: dict[str, list[Any]]) -> dict[str, Any]:
        texts = (rows[text], rows[pair]) if pair else (rows[text],)
        encoded = tokenizer(*texts, padding=padding, max_length=spec["max_length"], truncation=True)
        if regression:
            encoded["labels"] = [float(value) for value in rows[label]]
        else:
            encoded["labels"] = rows[label] if names else [label_id[value] for value in rows[label]]
        return encoded

    if spec["max_train_samples"] is not None:
        # The rows are taken before tokenizing, as seqcls does: run_glue.py tokenizes the whole
        # file first, which the Trainer at its best need not.
        rows = min(spec["max_train_samples"], len(raw["train"]))
        raw["train"] = raw["train"].select(range(rows))
    encoded = raw.map(preprocess, batched=True, remove_columns=raw["train"].column_names)
    train = encoded["train"]

    set_seed(spec["seed"])  # before the model: seeds the new classification head
    model = AutoModelForSequenceClassification.from_pretrained(
        spec["model"],
        num_labels=1 if regression else len(labels),
        dtype=torch.float32,
        **({"attn_implementation": "flash_attention_2"} if side.get("flatten") else {}),
    )
    if side.get("flatten") and (refusal := first_batch_refusal(model, train)):
        return {"skipped": refusal}
    length = {"max_steps": spec["steps"]} if spec["steps"] else {"num_train_epochs": spec["epochs"]}
    with tempfile.TemporaryDirectory(prefix="hf-trainer-run-") as out:
        training_args = TrainingArguments(
            output_dir=out,
            **length,
            per_device_train_batch_size=spec["batch_size"],
            per_device_eval_batch_size=spec["eval_batch_size"],
            learning_rate=spec["learning_rate"],
            weight_decay=spec["weight_decay"],
            warmup_steps=spec["warmup_ratio"],  # below 1: a share of the steps
            lr_scheduler_type="linear",
            seed=spec["seed"],
            bf16=side["bf16"],
            use_cpu=not torch.cuda.is_available(),  # bf16 on a CPU is refused without it
            train_sampling_strategy="group_by_length" if side["grouped"] else "random",
            eval_strategy="no",
            save_strategy="no",
            logging_strategy="no",
            report_to="none",
            disable_tqdm=True,
        )
        collator = default_data_collator if padding else DataCollatorWithPadding(tokenizer)
        if side.get("flatten"):
            collator = DataCollatorWithFlattening()
        trainer = Trainer(
            model=model,
            args=training_args,
            train_dataset=train,
            processing_class=tokenizer,
            data_collator=collator,
            callbacks=[ClockCallback(clock)],
        )
        clock.attach(model)
        trained = trainer.train()
        peak = peak_rss_mib()
        if spec.get("save_model"):  # as run_glue does after training
            trainer.save_model(f"{out}/model")
        prediction = trainer.predict(encoded["validation"])
    predictions, gold = np.asarray(prediction.predictions), np.asarray(prediction.label_ids)
    metrics = scores(spec["task"], predictions, gold)
    return clock.results() | {
        "framework": "hf",
        "metrics": metrics,
        "dev_accuracy": metrics.get("accuracy"),
        "train_examples": len(train),
        "eval_examples": len(encoded["validation"]),
        "optimizer_steps": trained.global_step,
        "train_runtime_s": trained.metrics["train_runtime"],
        "peak_rss_mib": peak,
        "precision": "bf16 autocast" if side["bf16"] else "fp32",
        "matmul_precision": torch.get_float32_matmul_precision(),
        "threads": torch.get_num_threads(),
        "optimizer": str(training_args.optim),
    }
