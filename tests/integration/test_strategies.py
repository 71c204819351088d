"""The sharded strategies (DeepSpeed ZeRO 2, FSDP full shard): parsed, and checked.

Neither runs here: both need CUDA GPUs (and DeepSpeed its package). What can be checked on a
CPU here is that the real CLI builds each stack as written, and refuses FSDP on CPU processes
in one line; the DeepSpeed lane
(tests/zero, ``bash scripts/test.sh --deepspeed``) runs DeepSpeed's own config checker on the
config Lightning makes of deepspeed.yaml, and reads back real ZeRO checkpoint folders.
"""

from pathlib import Path
from typing import Any

import pytest
import pytorch_lightning as pl
import yaml
from cli_runs import REPO, sample_fit

TRAINER = REPO / "configs" / "trainer"


def strategy_of(name: str) -> dict[str, Any]:
    strategy: dict[str, Any] = yaml.safe_load((TRAINER / f"{name}.yaml").read_text())["trainer"][
        "strategy"
    ]
    return strategy


@pytest.mark.parametrize("command", [[], ["mlm"]], ids=["seqcls", "seqcls-mlm"])
@pytest.mark.parametrize("name", ["deepspeed", "fsdp"])
def test_the_real_cli_stacks_each_strategy_on_gpu_yaml(
    name: str, command: list[str], capsys: pytest.CaptureFixture[str]
) -> None:
    from seqcls.cli import main

    config = "configs/mlm.yaml" if command else "configs/local.yaml"
    with pytest.raises(SystemExit) as done:
        main(
            [
                *command, "fit",
                "--config", str(REPO / config),
                "--config", str(TRAINER / "gpu.yaml"),
                "--config", str(TRAINER / f"{name}.yaml"),
                "--print_config",
            ]
        )  # fmt: skip
    assert done.value.code in (0, None)
    trainer = yaml.safe_load(capsys.readouterr().out)["trainer"]
    assert trainer["precision"] == "bf16-mixed"  # from gpu.yaml
    assert trainer["strategy"]["class_path"] == strategy_of(name)["class_path"]
    for key, value in strategy_of(name)["init_args"].items():
        assert trainer["strategy"]["init_args"][key] == value


def test_fsdp_on_two_cpu_processes_is_refused_in_one_line(
    capsys: pytest.CaptureFixture[str], tiny_bert: Path, tmp_path: Path
) -> None:
    """Lightning runs FSDP on CUDA GPUs only, and says so in a traceback from inside the
    Trainer; seqcls refuses the same options in one line before any process starts."""
    from seqcls.cli import main

    with pytest.raises(ValueError, match="requires a GPU accelerator"):
        pl.Trainer(accelerator="cpu", devices=2, strategy="fsdp", logger=False)
    on_two_cpus = ["--trainer.accelerator", "cpu", "--trainer.devices", "2"]
    with pytest.raises(SystemExit) as done:
        main(sample_fit(tmp_path / "run", tiny_bert, *on_two_cpus, "--trainer.strategy", "fsdp"))
    assert done.value.code == 2
    error = capsys.readouterr().err
    assert "Traceback" not in error
    assert (
        error.strip()
        .splitlines()[-1]
        .startswith(
            "seqcls: error: --trainer.strategy fsdp: FSDP shards the model across CUDA GPUs, and "
            "this run has none (--trainer.accelerator cpu)"
        )
    )
    assert not (tmp_path / "run").exists()


@pytest.mark.parametrize("name", ["deepspeed", "fsdp"])
def test_lora_with_a_sharded_strategy_is_refused_in_one_line(
    name: str, capsys: pytest.CaptureFixture[str], tiny_bert: Path, tmp_path: Path
) -> None:
    """Adapter-only checkpoints and the merged export need whole copies of the model, so the
    shipped sharded configs are refused with LoRA before anything is built, on any machine."""
    from seqcls.cli import main

    stacked = ["--config", str(TRAINER / f"{name}.yaml"), "--model.lora_rank", "4"]
    with pytest.raises(SystemExit) as done:
        main(sample_fit(tmp_path / "run", tiny_bert, *stacked))
    assert done.value.code == 2
    error = capsys.readouterr().err
    assert "Traceback" not in error
    last = error.strip().splitlines()[-1]
    assert last.startswith("seqcls: error: --model.lora_rank 4 with --trainer.strategy ")
    assert f"drop {name} (configs/trainer/{name}.yaml" in last
    assert not (tmp_path / "run").exists()
