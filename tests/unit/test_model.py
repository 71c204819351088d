from pathlib import Path

import pytest
import pytorch_lightning as pl
import torch

from seqcls.data import TextClassificationDataModule
from seqcls.errors import ConfigurationError
from seqcls.model import SequenceClassifier, linear_warmup_decay

REPO = Path(__file__).resolve().parents[2]
LABELS = ["account", "billing", "shipping", "technical"]


def sample_data(tokenizer: Path, cache: Path, **overrides: object) -> TextClassificationDataModule:
    arguments: dict[str, object] = {
        "train_file": str(REPO / "data/sample/train.csv"),
        "validation_file": str(REPO / "data/sample/validation.csv"),
        "tokenizer_name_or_path": str(tokenizer),
        "batch_size": 8,
        "max_train_samples": 32,
        "cache_dir": str(cache),
        **overrides,
    }
    return TextClassificationDataModule(**arguments)  # type: ignore[arg-type]


def quick_trainer(tmp_path: Path, **overrides: object) -> pl.Trainer:
    arguments: dict[str, object] = {
        "accelerator": "cpu",
        "max_steps": 2,
        "limit_val_batches": 0,
        "logger": False,
        "enable_checkpointing": False,
        "enable_progress_bar": False,
        "enable_model_summary": False,
        "default_root_dir": str(tmp_path),
        **overrides,
    }
    return pl.Trainer(**arguments)  # type: ignore[arg-type]


class RecordsTrainingMode(SequenceClassifier):
    modes: list[bool]

    def training_step(self, batch: dict[str, torch.Tensor], batch_idx: int) -> torch.Tensor:
        self.modes.append(self.model.training)
        return super().training_step(batch, batch_idx)


def test_dropout_is_active_inside_training_step(tiny_bert: Path, tmp_path: Path) -> None:
    model = RecordsTrainingMode(str(tiny_bert), label_names=LABELS)
    model.modes = []
    quick_trainer(tmp_path).fit(model, datamodule=sample_data(tiny_bert, tmp_path / "cache"))
    assert model.modes == [True, True]
    dropouts = [m for m in model.model.modules() if isinstance(m, torch.nn.Dropout) and m.p > 0]
    assert dropouts
    assert all(m.training for m in dropouts)


@pytest.mark.parametrize("fixture", ["tiny_bert", "tiny_roberta"])
def test_loss_falls_on_a_fixed_batch(
    fixture: str, request: pytest.FixtureRequest, tmp_path: Path
) -> None:
    tokenizer = request.getfixturevalue(fixture)
    data = sample_data(tokenizer, tmp_path / "cache")
    data.setup("fit")
    batch = next(iter(data.val_dataloader()[0]))
    torch.manual_seed(0)
    model = SequenceClassifier(str(tokenizer), label_names=LABELS, learning_rate=1e-2)
    optimizer = torch.optim.AdamW(model.parameters(), lr=1e-2)
    losses = []
    for _ in range(20):
        loss = model(batch).loss
        optimizer.zero_grad()
        loss.backward()
        optimizer.step()
        losses.append(loss.item())
    assert losses[-1] < 0.5 * losses[0]


def test_labels_configure_the_head_and_names(tiny_bert: Path) -> None:
    model = SequenceClassifier(str(tiny_bert), label_names=LABELS)
    assert model.model.config.num_labels == 4
    assert model.model.config.id2label == dict(enumerate(LABELS))
    assert model.model.config.label2id == {name: i for i, name in enumerate(LABELS)}


def test_no_label_names_is_a_clear_error(tiny_bert: Path) -> None:
    with pytest.raises(ConfigurationError, match=r"--data\.label_names"):
        SequenceClassifier(str(tiny_bert))


def test_weight_decay_skips_biases_and_norms(tiny_bert: Path, tmp_path: Path) -> None:
    model = SequenceClassifier(str(tiny_bert), label_names=LABELS, weight_decay=0.05)
    trainer = quick_trainer(tmp_path, max_steps=1)
    trainer.fit(model, datamodule=sample_data(tiny_bert, tmp_path / "cache"))
    decayed, plain = trainer.optimizers[0].param_groups
    names = {id(p): name for name, p in model.named_parameters()}
    decayed_names = {names[id(p)] for p in decayed["params"]}
    plain_names = {names[id(p)] for p in plain["params"]}
    assert decayed["weight_decay"] == 0.05
    assert plain["weight_decay"] == 0.0
    assert any("LayerNorm.weight" in name for name in plain_names)
    assert all(not name.endswith(".bias") for name in decayed_names)
    assert "model.classifier.weight" in decayed_names
    assert len(decayed_names) + len(plain_names) == len(names)


def test_schedule_warms_up_then_decays_to_zero() -> None:
    factor = linear_warmup_decay(warmup_steps=4, total_steps=20)
    warmup = [factor(step) for step in range(5)]
    assert warmup == sorted(warmup)
    assert warmup[0] > 0
    assert factor(4) == pytest.approx(1.0)
    assert factor(12) == pytest.approx(0.5)
    assert factor(20) == 0.0


def test_schedule_spans_the_trainers_total_steps(tiny_bert: Path, tmp_path: Path) -> None:
    model = SequenceClassifier(str(tiny_bert), label_names=LABELS, warmup_ratio=0.5)
    trainer = quick_trainer(tmp_path, max_steps=-1, max_epochs=2)
    trainer.fit(model, datamodule=sample_data(tiny_bert, tmp_path / "cache"))
    # 32 examples / batch 8 = 4 steps per epoch, 8 in all: warm-up ends at step 4, LR is 0 at 8.
    assert trainer.global_step == 8
    assert trainer.lr_scheduler_configs[0].scheduler.get_last_lr()[0] == 0.0
