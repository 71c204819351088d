"""A training step reads nothing back to the host between log steps: the real CLI on CPU
with a tiny BERT, counting the reads with ``host_reads.CountStepReads``.

The step is run as a GPU runs it: padded batches and the attention mask built on the device
(``speedups/device_setup.py`` takes the CUDA branch), and with ``--model.compile captured``.
"""

import json
import logging
from pathlib import Path

import host_reads
import pytest
import torch
from cli_runs import sample_fit
from torch._dynamo.utils import counters

import seqcls.speedups.device_setup
from seqcls.cli import main
from seqcls.model import captured_step

COUNT = [{"class_path": "host_reads.CountStepReads"}]


def fit(run: Path, model: Path, *extra: str) -> list[tuple[int, list[str]]]:
    host_reads.COUNTED.clear()
    host_reads.SHAPES.clear()
    main(
        sample_fit(
            run, model,
            "--data.cache_dir", str(run.parent / "cache"),
            "--data.num_workers", "1",
            "--data.batch_size", "8",
            "--trainer.max_steps", "8",
            "--trainer.log_every_n_steps", "4",
            "--trainer.enable_progress_bar", "true",
            "--trainer.callbacks", json.dumps(COUNT),
            *extra,
        )
    )  # fmt: skip
    return list(host_reads.COUNTED)


def test_a_padded_step_as_cuda_runs_it_reads_nothing_back(
    tmp_path: Path, tiny_bert: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(seqcls.speedups.device_setup, "on_cuda", lambda trainer: True)
    counted = fit(tmp_path / "run", tiny_bert, "--data.packing", "false")
    assert len(counted) >= 4
    assert [(step, reads) for step, reads in counted if reads] == []


def test_the_captured_step_reads_nothing_back_and_compiles_once(
    tmp_path: Path,
    tiny_bert: Path,
    monkeypatch: pytest.MonkeyPatch,
    caplog: pytest.LogCaptureFixture,
) -> None:
    # dynamo's tracing decides reads and recompiles; skipping code generation saves minutes.
    monkeypatch.setattr(captured_step, "BACKEND", "aot_eager")
    torch._dynamo.reset()
    counters.clear()
    with caplog.at_level(logging.INFO):
        counted = fit(tmp_path / "run", tiny_bert, "--model.compile", "captured")
    assert "--model.compile captured: batches in fixed shapes" in caplog.text
    assert len(counted) >= 4
    assert [(step, reads) for step, reads in counted if reads] == []
    # One shape for every training batch (packed densely), so graphs are not one per step:
    # the loss's, clipping's and the update's (AdamW's first step once more), evaluation's.
    assert len(host_reads.SHAPES) == 8
    assert len(set(host_reads.SHAPES)) == 1
    assert counters["stats"]["unique_graphs"] <= 6
    metrics = json.loads((tmp_path / "run/metrics.json").read_text())
    assert metrics["fit"]["steps"] == 8
