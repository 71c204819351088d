"""Off XLA, what keeps a TPU run's graphs stable changes nothing (seqcls.run.fit.xla_graphs)."""

import contextlib
import sys
from types import SimpleNamespace

import pytest
import torch
from pytorch_lightning.accelerators import CPUAccelerator, XLAAccelerator
from sample_data import fake_trainer

from seqcls.cli import main
from seqcls.run.checkpoints.saving import BestCheckpoint
from seqcls.run.fit.xla_graphs import EndEvaluationGraphs, log_host_value


def test_the_command_sets_xla_scalars_as_data_unless_told(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("XLA_NO_SPECIAL_SCALARS", raising=False)
    with contextlib.suppress(SystemExit):
        main(["fit", "--help"])
    import os

    assert os.environ["XLA_NO_SPECIAL_SCALARS"] == "1"
    monkeypatch.setenv("XLA_NO_SPECIAL_SCALARS", "0")
    with contextlib.suppress(SystemExit):
        main(["fit", "--help"])
    assert os.environ["XLA_NO_SPECIAL_SCALARS"] == "0"


def test_evaluation_batches_are_left_alone_off_xla(monkeypatch: pytest.MonkeyPatch) -> None:
    """Off XLA, each evaluation hook leaves its batch and outputs as they were and syncs
    nothing; on XLA (torch_xla stood in for) each one ends the batch's graph."""
    synced: list[bool] = []
    monkeypatch.setitem(sys.modules, "torch_xla", SimpleNamespace(sync=lambda: synced.append(True)))
    batch = {
        "input_ids": torch.arange(12).reshape(3, 4),
        "attention_mask": torch.tensor([[1, 1, 1, 1], [1, 1, 1, 0], [1, 1, 0, 0]]),
        "labels": torch.tensor([0, 1, 0]),
    }
    outputs = {"logits": torch.randn(3, 2)}
    before = {name: tensor.clone() for name, tensor in {**batch, **outputs}.items()}
    callback = EndEvaluationGraphs()
    hooks = [
        callback.on_validation_batch_end, callback.on_test_batch_end, callback.on_predict_batch_end,
    ]  # fmt: skip
    for hook in hooks:
        hook(fake_trainer(CPUAccelerator), None, outputs, batch, 0)
    assert synced == []
    for name, tensor in {**batch, **outputs}.items():
        assert tensor.shape == before[name].shape, name
        assert torch.equal(tensor, before[name]), name
    for hook in hooks:
        hook(fake_trainer(XLAAccelerator), None, outputs, batch, 0)
    assert synced == [True] * len(hooks)


def test_the_best_checkpoint_copies_scores_and_keeps_epoch_and_step() -> None:
    score = torch.tensor(0.5)
    trainer = SimpleNamespace(callback_metrics={"val/loss": score}, current_epoch=2, global_step=9)
    candidates = BestCheckpoint(monitor="val/loss")._monitor_candidates(trainer)
    assert float(candidates["val/loss"]) == 0.5
    score.fill_(0.75)  # the metric's next value must not rewrite the best one
    assert float(candidates["val/loss"]) == 0.5
    assert int(candidates["epoch"]) == 2
    assert int(candidates["step"]) == 9


def test_a_host_value_is_logged_as_a_number_with_sync_dist_off_xla() -> None:
    # sync_dist only tells Lightning the value is the same everywhere (no advice to sync).
    logged: dict[str, tuple[object, dict[str, object]]] = {}
    module = SimpleNamespace(
        trainer=SimpleNamespace(accelerator=CPUAccelerator()),
        log=lambda name, value, **options: logged.update({name: (value, options)}),
    )
    log_host_value(module, "val/ece", 0.125)
    assert logged["val/ece"] == (0.125, {"sync_dist": True, "add_dataloader_idx": False})
