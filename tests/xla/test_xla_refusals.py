"""Options that XLA cannot serve stop a run in one line, through the real CLI with the shipped
configs/trainer/tpu.yaml, rather than being silently dropped."""

import json
from pathlib import Path

import pytest
from xla_cpu import SAMPLE

from seqcls.cli import main

pytestmark = pytest.mark.xla
REPO = Path(__file__).resolve().parents[2]
ONE_XLA_CPU_DEVICE = json.dumps({"class_path": "xla_cpu.CPUXLAAccelerator"})


def fit_on_xla(tiny_bert: Path, run: Path, *extra: str) -> None:
    pytest.importorskip(
        "torch_xla", reason="torch_xla is not installed: bash scripts/test.sh --xla runs this lane"
    )
    main([
        "fit",
        "--config", str(REPO / "configs" / "trainer" / "tpu.yaml"),
        "--model.model_name_or_path", str(tiny_bert),
        "--data.train_file", str(SAMPLE / "train.csv"),
        "--data.validation_file", str(SAMPLE / "validation.csv"),
        "--data.max_train_samples", "32",
        "--data.batch_size", "8",
        "--data.cache_dir", str(run.parent / "cache"),
        "--trainer.max_steps", "2",
        "--trainer.devices", "1",
        "--trainer.accelerator", ONE_XLA_CPU_DEVICE,
        "--trainer.default_root_dir", str(run),
        *extra,
    ])  # fmt: skip


@pytest.mark.parametrize(
    ("flags", "message"),
    [
        (
            ["--model.compile", "true"],
            "--model.compile true: XLA compiles every graph itself, and torch.compile is not "
            "used there; leave it out",
        ),
        (
            ["--trainer.precision", "bf16-mixed"],
            "--trainer.precision bf16-mixed: XLA takes 32-true, bf16-true or 16-true, not mixed "
            "precision; give --trainer.precision 32-true",
        ),
        (
            ["--trainer.precision", "bf16-true"],
            "--trainer.precision bf16-true: weights kept in 16 bits do not move at a learning "
            "rate of 5e-05",
        ),
        (
            ["--data.group_by_length", "true"],
            "--data.group_by_length true: on XLA, batches are packed densely into fixed shapes, "
            "which keeps them random; give --data.padding buckets with it",
        ),
    ],
)
def test_an_option_xla_cannot_serve_is_refused_in_one_line(
    tiny_bert: Path,
    tmp_path: Path,
    capsys: pytest.CaptureFixture[str],
    flags: list[str],
    message: str,
) -> None:
    with pytest.raises(SystemExit) as stopped:
        fit_on_xla(tiny_bert, tmp_path / "run", *flags)
    assert stopped.value.code == 2
    assert message in capsys.readouterr().err
