"""Off XLA, what keeps a TPU run's graphs stable changes nothing (seqcls.run.fit.xla_graphs)."""

import contextlib
from types import SimpleNamespace

import pytest
import torch
from pytorch_lightning.accelerators import CPUAccelerator

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


def test_evaluation_batches_are_left_alone_off_xla() -> None:
    trainer = SimpleNamespace(accelerator=CPUAccelerator())
    EndEvaluationGraphs().on_predict_batch_end(trainer, None, None, None, 0)


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
