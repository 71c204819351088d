"""The XLA lane's fixture: seqcls trained for a few steps on one XLA:CPU device."""

from pathlib import Path
from typing import Any

import pytest
import pytorch_lightning as pl
import torch
from xla_cpu import SAMPLE, CPUXLAAccelerator, Run, StepCounts, Train

from seqcls.data import TextClassificationDataModule
from seqcls.model import SequenceClassifier


@pytest.fixture
def train_on_xla(tiny_bert: Path, tmp_path: Path) -> Train:
    """Trains seqcls's model on its data module for ``steps`` steps on one XLA:CPU device."""
    pytest.importorskip(
        "torch_xla", reason="torch_xla is not installed: bash scripts/test.sh --xla runs this lane"
    )
    from pytorch_lightning.strategies import SingleDeviceXLAStrategy

    def train(*, steps: int, **data_options: Any) -> Run:
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
        )
        counts = StepCounts()
        # No logger, progress bar or validation: each would read values back on its own
        # schedule, and these tests count what the training step itself does.
        trainer = pl.Trainer(
            accelerator=CPUXLAAccelerator(),
            strategy=SingleDeviceXLAStrategy(device=torch.device("xla", 0)),
            devices=1,
            max_steps=steps,
            limit_val_batches=0,
            num_sanity_val_steps=0,
            logger=False,
            enable_checkpointing=False,
            enable_progress_bar=False,
            enable_model_summary=False,
            callbacks=[counts],
            default_root_dir=tmp_path,
        )
        pl.seed_everything(0)
        trainer.fit(model, datamodule=data)
        return Run(trainer, data, counts.steps)

    return train
