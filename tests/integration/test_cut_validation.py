"""A preemption that comes while a fit validates: the same command again runs that validation
whole before it trains on, so the resumed run keeps the weights an uninterrupted one keeps."""

import signal
from pathlib import Path

import pytest
from cli_runs import run_metrics, sample_fit
from tensorboard.backend.event_processing.event_accumulator import EventAccumulator

from seqcls.cli import main


def fit(run: Path, model: Path, *extra: str) -> None:
    main(sample_fit(
        run, model,
        "--data.cache_dir", str(run.parent / "cache"),
        # High enough that the first validation's weights stay the best.
        "--model.learning_rate", "3e-3",
        *extra,
    ))  # fmt: skip


def validated_steps(run: Path) -> list[int]:
    steps: set[int] = set()
    for events in (run / "logs").rglob("events.out.tfevents*"):
        accumulator = EventAccumulator(str(events))
        accumulator.Reload()
        if "val/accuracy" in accumulator.Tags()["scalars"]:
            steps |= {event.step for event in accumulator.Scalars("val/accuracy")}
    return sorted(steps)


def test_a_validation_cut_by_a_stop_is_run_again_when_the_fit_resumes(
    tiny_bert: Path, tmp_path: Path
) -> None:
    fit(tmp_path / "whole", tiny_bert)
    whole = run_metrics(tmp_path / "whole")
    assert whole["best"]["step"] == 4  # the first validation's weights: what the cut one scores

    cut = tmp_path / "cut"
    with pytest.raises(SystemExit) as stopped:
        fit(cut, tiny_bert, "--trainer.callbacks+=resume_probe.SigtermInValidation")
    assert stopped.value.code == 128 + signal.SIGTERM
    assert run_metrics(cut)["fit"]["steps"] == 4
    fit(cut, tiny_bert)  # the same command again
    # Each epoch's validation logged once, the cut one included, as in the whole run.
    assert validated_steps(cut) == validated_steps(tmp_path / "whole")
    assert len(validated_steps(cut)) == 3
    assert run_metrics(cut) == whole
    best = (cut / "checkpoints" / "best-epoch0-step4.ckpt").is_file()
    assert best, sorted(p.name for p in (cut / "checkpoints").iterdir())
