import logging
from pathlib import Path
from types import SimpleNamespace

import pytest
import pytorch_lightning as pl
import torch
from pytorch_lightning.accelerators import XLAAccelerator
from sample_data import sample_data as shared_sample_data
from transformers import masking_utils

from seqcls.data.classification import TextClassificationDataModule
from seqcls.errors import ConfigurationError
from seqcls.model.classifier import SequenceClassifier
from seqcls.model.optimization import linear_warmup_decay
from seqcls.speedups.device_mask import DEVICE_MASK_ATTENTION

REPO = Path(__file__).resolve().parents[2]
LABELS = ["account", "billing", "shipping", "technical"]


def sample_data(tokenizer: Path, cache: Path, **overrides: object) -> TextClassificationDataModule:
    arguments: dict[str, object] = {"batch_size": 8, "max_train_samples": 32, **overrides}
    return shared_sample_data(tokenizer, cache, **arguments)


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
    # A rate given: unset, a fit trains without dropout (test_dropout_option.py).
    model = RecordsTrainingMode(str(tiny_bert), label_names=LABELS, dropout=0.1)
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
    data = sample_data(tokenizer, tmp_path / "cache", sub_batches=1)
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
    groups = trainer.optimizers[0].param_groups  # by depth too: the fresh top layer's rate
    assert {group["weight_decay"] for group in groups} == {0.05, 0.0}
    names = {id(p): name for name, p in model.named_parameters()}
    decayed_names = {names[id(p)] for g in groups if g["weight_decay"] for p in g["params"]}
    plain_names = {names[id(p)] for g in groups if not g["weight_decay"] for p in g["params"]}
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


def test_schedule_counts_accumulation_and_dropped_batches(
    tiny_bert: Path, tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    model = SequenceClassifier(str(tiny_bert), label_names=LABELS, warmup_ratio=0.0)
    trainer = quick_trainer(tmp_path, max_steps=-1, max_epochs=2, accumulate_grad_batches=2)
    # 30 examples, batch 8, the last 6 dropped: 3 batches an epoch, 1 optimizer step (2 batches)
    # plus 1 for the odd batch that Lightning still steps on at the epoch's end: 2 per epoch.
    data = sample_data(tiny_bert, tmp_path / "cache", max_train_samples=30, drop_last=True)
    with caplog.at_level(logging.INFO):
        trainer.fit(model, datamodule=data)
    assert trainer.global_step == 4
    assert trainer.lr_scheduler_configs[0].scheduler.get_last_lr()[0] == 0.0
    assert "Effective batch size 16 = 8 per device x 1 device(s) x 1 node(s) x 2 accumulated" in (
        caplog.text
    )
    assert "4 optimizer steps" in caplog.text


def test_gradient_checkpointing_recomputes_and_keeps_the_gradients(tiny_bert: Path) -> None:
    plain = SequenceClassifier(str(tiny_bert), label_names=LABELS)
    recomputing = SequenceClassifier(
        str(tiny_bert), label_names=LABELS, gradient_checkpointing=True
    )
    recomputing.load_state_dict(plain.state_dict())
    batch = {
        "input_ids": torch.randint(5, 100, (4, 16)),
        "attention_mask": torch.ones(4, 16, dtype=torch.long),
        "labels": torch.tensor([0, 1, 2, 3]),
    }
    grads, layer_calls = [], []
    for model in (plain, recomputing):
        calls: list[int] = []
        layer = model.model.bert.encoder.layer[0].attention  # runs inside the checkpoint
        layer.register_forward_hook(lambda *_, calls=calls: calls.append(1))
        torch.manual_seed(0)  # the same dropout masks on both sides; recomputation reuses them
        model(batch).loss.backward()
        grads.append(
            torch.cat([p.grad.flatten() for p in model.parameters() if p.grad is not None])
        )
        layer_calls.append(len(calls))
    assert layer_calls == [1, 2]  # the checkpointed layer ran again in the backward pass
    assert torch.allclose(grads[0], grads[1], atol=1e-6)


def test_on_xla_attention_builds_its_mask_without_reading_it_back(
    tiny_bert: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    model = SequenceClassifier(str(tiny_bert), label_names=LABELS).eval()
    batch = {
        "input_ids": torch.randint(5, 100, (2, 8)),
        "attention_mask": torch.ones(2, 8, dtype=torch.long),  # no padding: the skippable case
    }
    expected = model(batch).logits
    host_checks: list[bool] = []
    original = masking_utils._ignore_bidirectional_mask_sdpa

    def record(*args: object, **kwargs: object) -> bool:
        host_checks.append(True)
        return original(*args, **kwargs)  # type: ignore[arg-type]

    monkeypatch.setattr(masking_utils, "_ignore_bidirectional_mask_sdpa", record)
    model(batch)
    # The trap: transformers reads the mask back to the host (padding_mask.all()) each forward.
    assert host_checks, "transformers no longer checks the mask on the host; drop the workaround"
    xla = object.__new__(XLAAccelerator)
    model.trainer = SimpleNamespace(accelerator=xla, precision="32-true")  # type: ignore[assignment]
    model.setup("fit")
    assert model.model.config._attn_implementation == DEVICE_MASK_ATTENTION
    host_checks.clear()  # the switch's check ran the model's own attention once, at setup
    assert torch.allclose(model(batch).logits, expected, atol=1e-6)
    assert not host_checks


def flat_grads(model: torch.nn.Module) -> torch.Tensor:
    return torch.cat([p.grad.flatten() for p in model.parameters() if p.grad is not None])
