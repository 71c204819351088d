"""A ``--model.compile captured`` fit with gradient accumulation and clipping, stopped by
SIGTERM and run again, resumes the state it stopped with: the optimizer's steps and moments,
its learning rate (a tensor in the captured step) and the schedule, as ``last.ckpt`` holds
them, where the uninterrupted run had them at that step.

The real CLI on CPU with a tiny BERT, in one thread; dynamo with AOTAutograd and no code
generation (``aot_eager``), which traces the step as torch's own compiler does, in seconds.
"""

import json
from pathlib import Path

import pytest
from cli_runs import sample_fit
from resume_probe import recorded

from seqcls.cli import main
from seqcls.model import captured_step

STOP_AT = 3
STOP = {"class_path": "resume_probe.SigtermAt", "init_args": {"step": STOP_AT}}

pytestmark = pytest.mark.usefixtures("one_thread")


def fit(run: Path, model: Path, *callbacks: dict[str, object]) -> None:
    record = {"class_path": "resume_probe.StepRecorder", "init_args": {"path": str(run) + ".jsonl"}}
    main(sample_fit(
        run, model,
        "--model.compile", "captured",
        "--data.cache_dir", str(run.parent / "cache"),
        "--data.batch_size", "8",
        "--trainer.max_steps", "6",
        "--trainer.accumulate_grad_batches", "2",
        "--trainer.gradient_clip_val", "0.5",
        "--trainer.callbacks", json.dumps([*callbacks, record]),
    ))  # fmt: skip


def test_a_captured_fit_stopped_and_run_again_resumes_its_optimizer_state(
    tmp_path: Path, tiny_bert: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(captured_step, "BACKEND", "aot_eager")
    fit(tmp_path / "uninterrupted", tiny_bert)
    run = tmp_path / "stopped"
    with pytest.raises(SystemExit) as stopped:
        fit(run, tiny_bert, STOP)
    assert stopped.value.code == 143
    fit(run, tiny_bert)
    ours = recorded(Path(f"{run}.jsonl"))
    theirs = recorded(tmp_path / "uninterrupted.jsonl")
    assert sorted(ours) == sorted(theirs) == list(range(6))
    # The resumed epoch goes on from the batch after the last one trained (it started over
    # when the fixed-shape loader's pass was made before the loops were restored).
    assert [ours[step]["rows"] for step in range(6)] == [theirs[step]["rows"] for step in range(6)]
    resumed, reference = ours[STOP_AT], theirs[STOP_AT]
    assert resumed["adam_steps"] == reference["adam_steps"] == [float(STOP_AT)]
    assert resumed["lr"] == pytest.approx(reference["lr"], rel=1e-6)
    flat = [
        [value for pair in record["moments"] for value in pair] for record in (resumed, reference)
    ]
    assert flat[0] == pytest.approx(flat[1], rel=1e-6, abs=1e-12)
