"""The XLA lane's fixture: seqcls trained for a few steps on one XLA:CPU device."""

from pathlib import Path
from typing import Any

import pytest
import pytorch_lightning as pl
from xla_cpu import SAMPLE, Run, StepCounts, Train, one_device_trainer

from seqcls.data.classification import TextClassificationDataModule
from seqcls.model.classifier import SequenceClassifier


@pytest.fixture
def train_on_xla(tiny_bert: Path, tmp_path: Path) -> Train:
    """Trains seqcls's model on its data module for ``steps`` steps on one XLA:CPU device."""
    pytest.importorskip(
        "torch_xla", reason="torch_xla is not installed: bash scripts/test.sh --xla runs this lane"
    )

    def train(
        *, steps: int, model_options: dict[str, Any] | None = None, **data_options: Any
    ) -> Run:
        options: dict[str, Any] = {
            "train_file": str(SAMPLE / "train.csv"),
            "validation_file": str(SAMPLE / "validation.csv"),
            "max_length": 64,
            "batch_size": 4,
            **data_options,
        }
        data = TextClassificationDataModule(
            tokenizer_name_or_path=str(tiny_bert), cache_dir=str(tmp_path / "cache"), **options
        )
        model = SequenceClassifier(
            str(tiny_bert),
            label_names=data.label_names,
            problem_type=data.problem_type,
            metrics=data.metrics,
            **(model_options or {}),
        )
        counts = StepCounts()
        trainer = one_device_trainer(steps, [counts], tmp_path)
        pl.seed_everything(0)
        trainer.fit(model, datamodule=data)
        return Run(trainer, data, counts.steps)

    return train
