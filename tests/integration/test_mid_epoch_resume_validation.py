"""A fit that saves ``last.ckpt`` every step, crashed and run again with the same command,
validates as an uninterrupted one does and keeps the same best checkpoint: the step that
ends an epoch is saved after its validation, not before it."""

from pathlib import Path

import pytest
import torch
from cli_runs import run_metrics, sample_fit

from seqcls.cli import main

STEPS_PER_EPOCH = 4


def fit(run: Path, model: Path, *extra: str) -> None:
    main(sample_fit(
        run, model,
        "--data.cache_dir", str(run.parent / "cache"),
        # High enough that the first validation's weights stay the best.
        "--model.learning_rate", "3e-3",
        "--last_checkpoint.every_n_steps", "1",
        *extra,
    ))  # fmt: skip


def best_files(run: Path) -> list[str]:
    return sorted(path.name for path in (run / "checkpoints").glob("best-*.ckpt"))


def test_a_crash_after_an_epochs_last_step_keeps_that_epochs_validation(
    tiny_bert: Path, tmp_path: Path
) -> None:
    fit(tmp_path / "whole", tiny_bert)
    whole = run_metrics(tmp_path / "whole")
    assert best_files(tmp_path / "whole") == ["best-epoch0-step4.ckpt"]

    run = tmp_path / "crashed"
    with pytest.raises(RuntimeError, match="crashed before step"):
        # Before the second epoch's first step: the first epoch trained and validated.
        fit(run, tiny_bert, "--trainer.callbacks+=resume_probe.CrashAt",
            "--trainer.callbacks.step", str(STEPS_PER_EPOCH))  # fmt: skip
    # last.ckpt holds the state after the first validation, which the best one was saved with.
    saved = torch.load(run / "checkpoints/last.ckpt", weights_only=False)
    best_state = next(v for k, v in saved["callbacks"].items() if k.startswith("BestCheckpoint"))
    assert Path(best_state["best_model_path"]).name == "best-epoch0-step4.ckpt"

    fit(run, tiny_bert)  # the same command again
    assert best_files(run) == best_files(tmp_path / "whole")
    assert run_metrics(run) == whole
