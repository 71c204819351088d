"""seqcls's data module on ``data/sample``, as unit tests build it, and a stand-in trainer."""

from pathlib import Path
from types import SimpleNamespace
from typing import Any

from seqcls.data.classification import TextClassificationDataModule

SAMPLE = Path(__file__).resolve().parents[1] / "data" / "sample"


def sample_data(tokenizer: Path, cache: Path, **overrides: Any) -> TextClassificationDataModule:
    """The sample's training, validation and predict files, batch 16; ``overrides`` on top."""
    arguments: dict[str, Any] = {
        "train_file": str(SAMPLE / "train.csv"),
        "validation_file": str(SAMPLE / "validation.csv"),
        "predict_file": str(SAMPLE / "predict.csv"),
        "tokenizer_name_or_path": str(tokenizer),
        "batch_size": 16,
        "cache_dir": str(cache),
        **overrides,
    }
    return TextClassificationDataModule(**arguments)


def fake_trainer(accelerator: type, world_size: int = 1, global_rank: int = 0) -> Any:
    """What a data module asks of its trainer. Only isinstance() is asked of the accelerator,
    so none is constructed (XLA's would need torch_xla)."""
    return SimpleNamespace(
        accelerator=object.__new__(accelerator), world_size=world_size, global_rank=global_rank
    )


def set_up_on(
    accelerator: type, data: TextClassificationDataModule
) -> TextClassificationDataModule:
    """``data`` set up for fitting under a trainer on ``accelerator``."""
    data.trainer = fake_trainer(accelerator)
    data.setup("fit")
    return data
