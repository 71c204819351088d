"""The HF Trainer side of benchmarks/compare.py, as run_glue.py sets it up.

The data is read with ``datasets.load_dataset`` and every row tokenized with ``map`` (cached
by datasets, as in run_glue), then the first ``max_train_samples`` rows are kept. Padding is
run_glue's ``--pad_to_max_length`` (``max_length``) or dynamic (``DataCollatorWithPadding``);
``group_by_length`` is ``train_sampling_strategy="group_by_length"``.
"""

import tempfile
from typing import Any

import datasets
import numpy as np
import torch
from measure import StepClock, peak_rss_mib
from transformers import (
    AutoModelForSequenceClassification,
    AutoTokenizer,
    DataCollatorWithPadding,
    Trainer,
    TrainerCallback,
    TrainingArguments,
    default_data_collator,
    set_seed,
)


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
    if suffix in ("jsonl", "json"):
        return datasets.load_dataset("json", data_files=files)
    delimiter = "\t" if suffix == "tsv" else ","
    return datasets.load_dataset("csv", data_files=files, delimiter=delimiter)


def train_and_score(spec: dict[str, Any]) -> dict[str, Any]:
    side, clock = spec["side"], StepClock(spec["warmup_steps"])
    raw = load(spec)
    label = spec["label_column"]
    feature = raw["train"].features[label]
    names = feature.names if isinstance(feature, datasets.ClassLabel) else None
    labels = names or sorted(set(raw["train"][label]))
    label_id = {name: i for i, name in enumerate(labels)}
    tokenizer = AutoTokenizer.from_pretrained(spec["model"])
    padding = "max_length" if side["padding"] == "max_length" else False
    text, pair = spec["text_column"], spec["text_pair_column"]

    def preprocess(rows: dict[str, list[Any]]) -> dict[str, Any]:
        texts = (rows[text], rows[pair]) if pair else (rows[text],)
        encoded = tokenizer(*texts, padding=padding, max_length=spec["max_length"], truncation=True)
        encoded["label"] = rows[label] if names else [label_id[value] for value in rows[label]]
        return encoded

    encoded = raw.map(preprocess, batched=True, remove_columns=raw["train"].column_names)
    train = encoded["train"].select(range(min(spec["max_train_samples"], len(encoded["train"]))))

    set_seed(spec["seed"])  # before the model: seeds the new classification head
    model = AutoModelForSequenceClassification.from_pretrained(
        spec["model"], num_labels=len(labels), dtype=torch.float32
    )
    with tempfile.TemporaryDirectory(prefix="hf-compare-run-") as out:
        training_args = TrainingArguments(
            output_dir=out,
            per_device_train_batch_size=spec["batch_size"],
            per_device_eval_batch_size=spec["eval_batch_size"],
            max_steps=spec["steps"],
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
        trainer = Trainer(
            model=model,
            args=training_args,
            train_dataset=train,
            processing_class=tokenizer,
            data_collator=collator,
            callbacks=[ClockCallback(clock)],
        )
        clock.attach(trainer.model)
        trainer.train()
        peak = peak_rss_mib()
        prediction = trainer.predict(encoded["validation"])
    predicted = np.argmax(np.asarray(prediction.predictions), axis=1)
    accuracy = float(np.mean(predicted == np.asarray(prediction.label_ids)))
    return clock.results() | {
        "peak_rss_mib": peak,
        "dev_accuracy": accuracy,
        "precision": "bf16 autocast" if side["bf16"] else "fp32",
        "threads": torch.get_num_threads(),
        "optimizer": str(training_args.optim),
    }
