"""``RUN/model/README.md``: a Hugging Face model card for the model a fit exports.

The card opens with YAML metadata, as the Hub reads it (``base_model``, ``datasets``,
``metrics``, ``pipeline_tag``, ``library_name``, and ``license`` when the base model's own
card states one), then says in prose and tables what a reader of the model needs: its
labels, its validation metrics, the training recipe, the hardware and time it took, and
the command and configuration that train it again.
"""

import os
import platform
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytorch_lightning as pl
import torch
import yaml
from jsonargparse import Namespace
from pytorch_lightning.accelerators import CPUAccelerator, CUDAAccelerator

from seqcls.cloud.storage import is_remote, write_text
from seqcls.run.outputs.metrics_file import validation_splits

README = "README.md"
# The recipe, as the resolved config holds it: (table row, config section, key).
RECIPE_KEYS = [
    ("learning rate", "model", "learning_rate"),
    ("weight decay", "model", "weight_decay"),
    ("warm-up ratio", "model", "warmup_ratio"),
    ("batch size per device", "data", "batch_size"),
    ("max length (tokens)", "data", "max_length"),
    ("max epochs", "trainer", "max_epochs"),
    ("max steps", "trainer", "max_steps"),
    ("gradient accumulation", "trainer", "accumulate_grad_batches"),
    ("precision", "trainer", "precision"),
    ("pooling (what the head reads)", "model", "pooling"),
    ("top layers re-initialised", "model", "reinit_layers"),
    ("pair encoding", "model", "pair_encoding"),  # for pairs only
]
# seqcls reads such a model's pairs as it was trained; transformers' pipeline cannot.
SEPARATE_PAIRS_NOTE = (
    " Each text of a pair is encoded on its own and the two encodings compared by the head "
    "`pair_head` (`seqcls_pair_encoding: separate` in `config.json`): score pairs with "
    "`seqcls predict`, as transformers' `pipeline` reads a pair as one input."
)
DATA_FILE_KEYS = ["train_file", "validation_file", "test_file"]


@dataclass(frozen=True)
class ModelCard:
    """What the card states; ``render()`` writes it out."""

    command: str  # "seqcls fit" or "seqcls mlm fit"
    pipeline_tag: str
    base_model: str
    metrics: dict[str, Any]  # the run's metrics.json
    recipe: dict[str, Any]
    hardware: str
    minutes: float
    config_yaml: str
    label_names: list[str] = field(default_factory=list)
    metric_names: list[str] = field(default_factory=list)  # the model's, first one decides best
    problem_type: str | None = None
    datasets: list[str] = field(default_factory=list)  # hub ids
    data_files: dict[str, str] = field(default_factory=dict)  # key -> file name
    license: str | None = None
    base_model_origin: str | None = None  # what the base model was fine-tuned from, if anything
    # Validation flag -> (its rows that are training rows too, its rows), where any are.
    seen_rows: dict[str, tuple[int, int]] = field(default_factory=dict)

    def metadata(self) -> dict[str, Any]:
        # The task's metrics, as the data named them; else every validation metric but the loss.
        first = next(iter(validation_splits(self.metrics).values()), {})
        names = self.metric_names or sorted(name for name in first if name != "loss")
        meta: dict[str, Any] = {"base_model": self.base_model}
        if self.datasets:
            meta["datasets"] = self.datasets
        if self.license:
            meta["license"] = self.license
        meta["library_name"] = "transformers"
        if names:
            meta["metrics"] = names
        meta["pipeline_tag"] = self.pipeline_tag
        meta["tags"] = ["seqcls"]
        return meta

    def render(self) -> str:
        front = yaml.safe_dump(self.metadata(), sort_keys=False)
        sections = [
            f"---\n{front}---\n",
            f"# Fine-tuned {self.base_model}\n\n{self._summary()}\n",
            *([self._labels()] if self.label_names else []),
            self._validation(),
            self._recipe(),
            "## Hardware and time\n\n"
            f"Trained on {self.hardware}; the fit took {_duration(self.minutes)}.\n",
            self._reproduce(),
        ]
        return "\n".join(sections)

    def _summary(self) -> str:
        data = ", ".join(f"`{name}`" for name in self.datasets) or ", ".join(
            f"`{name}` ({key.removesuffix('_file')})" for key, name in self.data_files.items()
        )
        task = f" for {self.problem_type.replace('_', ' ')}" if self.problem_type else ""
        origin = (
            f" `{self.base_model}` was itself fine-tuned from `{self.base_model_origin}`."
            if self.base_model_origin
            else ""
        )
        pairs = SEPARATE_PAIRS_NOTE if self.recipe.get("pair encoding") == "separate" else ""
        return (
            f"`{self.base_model}` trained{task} on {data or 'the data in the config below'} "
            f"with `{self.command}` (seqcls: Hugging Face models trained with PyTorch Lightning)."
            f"{origin}{pairs}"
        )

    def _labels(self) -> str:
        rows = "".join(f"| {i} | {name} |\n" for i, name in enumerate(self.label_names))
        return f"## Labels\n\n| id | label |\n|---|---|\n{rows}"

    def _validation(self) -> str:
        fit = self.metrics.get("fit", {})
        splits = validation_splits(self.metrics)
        if not fit.get("validated") or not splits:
            note = fit.get("note", "no validation ran")
            return f"## Validation metrics\n\nNot validated: {note}.\n"
        step = self.metrics["best"]["step"]
        # Several validation sets (MNLI's matched and mismatched) name theirs in each row.
        rows = "".join(
            f"| {name if len(splits) == 1 else f'{split}/{name}'} | {value:.4f} |\n"
            for split, values in splits.items()
            for name, value in sorted(values.items())
        )
        seen = "".join(
            f"\n{count:,} of the {total:,} validation rows (`{flag}`) have the same tokens as "
            "a training row; these metrics count them as unseen.\n"
            for flag, (count, total) in self.seen_rows.items()
        )
        return (
            "## Validation metrics\n\n"
            f"Of these weights ({fit['exported']}, optimizer step {step}), on the validation "
            f"data:\n\n| metric | value |\n|---|---|\n{rows}{seen}"
        )

    def _recipe(self) -> str:
        rows = "".join(f"| {name} | {value} |\n" for name, value in self.recipe.items())
        return f"## Training recipe\n\n| setting | value |\n|---|---|\n{rows}"

    def _reproduce(self) -> str:
        command = f"{self.command} --config config.yaml --trainer.default_root_dir runs/again"
        return (
            "## How to reproduce\n\n"
            "Save the configuration below as `config.yaml` (the run directory holds it too), "
            f"then:\n\n```bash\n{command}\n```\n\n```yaml\n{self.config_yaml.rstrip()}\n```\n"
        )


def describe_hardware(trainer: pl.Trainer) -> str:
    """``1 node x 1 CPU (x86_64, 16 cores)``, ``1 node x 8 GPU (NVIDIA H100 80GB HBM3)``..."""
    accelerator = trainer.accelerator
    if isinstance(accelerator, CUDAAccelerator):
        kind, detail = "GPU", torch.cuda.get_device_name(trainer.strategy.root_device)
    elif isinstance(accelerator, CPUAccelerator):
        kind, detail = "CPU", f"{platform.machine()}, {os.cpu_count()} cores"
    else:
        kind, detail = type(accelerator).__name__.removesuffix("Accelerator"), ""
    device = f"{trainer.num_devices} {kind}" + (f" ({detail})" if detail else "")
    return f"{trainer.num_nodes} node(s) x {device}, precision {trainer.precision}"


def base_model_card(base_model: str) -> dict[str, Any]:
    """The metadata of a local base model's own card (its ``license``; for a model fine-tuned
    by seqcls, its own ``base_model``); empty where there is none."""
    card = Path(base_model) / README
    if is_remote(base_model) or not card.is_file():
        return {}
    text = card.read_text(encoding="utf-8", errors="replace")
    if not text.startswith("---"):
        return {}
    try:
        meta = yaml.safe_load(text.split("---", 2)[1])
    except yaml.YAMLError:
        return {}
    return meta if isinstance(meta, dict) else {}


def model_card(
    config: Namespace,
    trainer: pl.Trainer,
    hparams: dict[str, Any],
    *,
    command: str,
    pipeline_tag: str,
    metrics: dict[str, Any],
    minutes: float,
    config_yaml: str,
    seen_rows: dict[str, tuple[int, int]] | None = None,
) -> ModelCard:
    """The card of the model that ``config`` trained on ``trainer``."""
    base_model = str(config.model.model_name_or_path)
    base = base_model_card(base_model)
    recipe = {}
    for name, section, key in RECIPE_KEYS:
        value = config[section].get(key)
        if section == "model" and hparams.get(key) is not None:
            # What trained, where the model resolved it: an unset learning rate, auto pooling.
            value = hparams[key]
        if key == "pair_encoding" and not config.data.get("text_pair_column"):
            continue
        if value is not None and not (key == "max_steps" and value == -1):  # -1: no bound
            recipe[name] = value
    recipe["seed"] = config.get("seed_everything")
    recipe["optimizer steps trained"] = trainer.global_step
    recipe["devices x nodes"] = f"{trainer.num_devices} x {trainer.num_nodes}"
    data = config.data
    hub = [str(data.dataset_name)] if data.get("dataset_name") else []
    files = {key: os.path.basename(str(data[key])) for key in DATA_FILE_KEYS if data.get(key)}
    return ModelCard(
        command=command,
        pipeline_tag=pipeline_tag,
        base_model=base_model,
        metrics=metrics,
        recipe=recipe,
        hardware=describe_hardware(trainer),
        minutes=minutes,
        config_yaml=config_yaml,
        label_names=list(hparams.get("label_names") or []),
        metric_names=list(hparams.get("metrics") or []),
        problem_type=hparams.get("problem_type"),
        datasets=hub,
        data_files=files,
        license=str(base["license"]) if base.get("license") else None,
        base_model_origin=str(base["base_model"]) if base.get("base_model") else None,
        seen_rows=dict(seen_rows or {}),
    )


def write_model_card(model_dir: str, card: ModelCard) -> str:
    path = os.path.join(model_dir, README)
    write_text(path, card.render())
    return path


def _duration(minutes: float) -> str:
    return f"{minutes:.1f} minutes" if minutes >= 1 else f"{minutes * 60:.0f} seconds"
