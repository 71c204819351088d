"""The best validation's rows in a checkpoint: saved as plain tensors, restored where they
still describe the exported weights, and absent from a checkpoint of an older seqcls."""

import io
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import torch
from pytorch_lightning.callbacks import ModelCheckpoint

from seqcls.run.report.best_validation import BestValidation
from seqcls.run.report.files import Rows


def rows(seed: int) -> Rows:
    generator = torch.Generator().manual_seed(seed)
    return Rows(
        torch.arange(5), torch.randn(5, 3, generator=generator), torch.tensor([0, 1, 2, 0, 1])
    )


def trainer(
    step: int, accuracy: float | None, best_score: float | None, judged: bool = True
) -> Any:
    """What BestValidation reads of a trainer: the best checkpoint callback, metrics, step."""
    judge = ModelCheckpoint(dirpath=Path("unused"), monitor="val/accuracy", mode="max")
    judge.best_model_score = None if best_score is None else torch.tensor(best_score)
    metrics = {} if accuracy is None else {"val/accuracy": torch.tensor(accuracy)}
    callbacks = [judge] if judged else []
    return SimpleNamespace(
        checkpoint_callbacks=callbacks, callback_metrics=metrics, global_step=step
    )


def through_a_file(state: dict[str, Any]) -> dict[str, Any]:
    buffer = io.BytesIO()
    torch.save(state, buffer)
    buffer.seek(0)
    loaded: dict[str, Any] = torch.load(buffer, weights_only=True)
    return loaded


def assert_same_rows(ours: dict[str, Rows], theirs: dict[str, Rows]) -> None:
    assert list(ours) == list(theirs)  # the first validation set, calibrated on, stays first
    for prefix, expected in theirs.items():
        for field in ("index", "logits", "targets"):
            assert torch.equal(getattr(ours[prefix], field), getattr(expected, field)), field


def test_the_best_rows_survive_a_checkpoint_loaded_with_weights_only() -> None:
    best = {"val_matched": rows(0), "val_mismatched": rows(1)}
    saved = BestValidation()
    saved.offer(trainer(4, 0.5, None), best)
    saved.offer(trainer(6, 0.25, 0.5), {"val_matched": rows(2), "val_mismatched": rows(3)})

    restored = BestValidation()
    restored.load_state_dict(through_a_file(saved.state_dict()))
    # Resumed at step 7: a later validation that scores no better leaves the best alone.
    restored.offer(trainer(8, 0.5, 0.5), {"val_matched": rows(4), "val_mismatched": rows(5)})
    assert_same_rows(restored.of_exported(trainer(8, None, 0.5)), best)
    assert (restored.score, restored.step) == (0.5, 4)


def test_restored_rows_the_best_checkpoint_does_not_hold_are_dropped() -> None:
    saved = BestValidation()
    saved.offer(trainer(4, 0.5, None), {"val": rows(0)})
    state = through_a_file(saved.state_dict())

    other_judge = BestValidation()
    other_judge.load_state_dict(state)  # the best checkpoint callback started over
    assert other_judge.of_exported(trainer(7, None, None)) == {}

    # No best checkpoint: the latest weights are exported, measured if at the saved step.
    for step, kept in [(4, True), (7, False)]:
        unjudged = BestValidation()
        unjudged.load_state_dict(state)
        assert bool(unjudged.of_exported(trainer(step, None, None, judged=False))) is kept


def test_a_checkpoint_of_an_older_seqcls_knows_only_the_validations_after_it() -> None:
    older = BestValidation()
    older.load_state_dict({})
    older.load_state_dict({"best_score": 0.9})  # anything but rows: nothing to restore
    assert older.of_exported(trainer(8, None, 0.9)) == {}
    first = {"val": rows(0)}
    older.offer(trainer(10, 0.25, 0.9), first)  # the first validation it sees is its best
    assert_same_rows(older.of_exported(trainer(10, None, 0.9)), first)
    assert BestValidation().state_dict() == {}  # nothing validated: nothing saved
