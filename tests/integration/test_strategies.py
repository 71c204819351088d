"""The sharded strategies (DeepSpeed ZeRO 2, FSDP full shard): parsed, checked, run if possible.

Neither runs here: both need CUDA GPUs (and DeepSpeed its package). What can be checked on a
CPU here is that the real CLI builds each stack as written; the DeepSpeed lane
(tests/zero, ``bash scripts/test.sh --deepspeed``) runs DeepSpeed's own config checker on the
config Lightning makes of deepspeed.yaml, and reads back real ZeRO checkpoint folders.
"""

from pathlib import Path
from typing import Any

import pytest
import pytorch_lightning as pl
import yaml

REPO = Path(__file__).resolve().parents[2]
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


def test_fsdp_with_two_cpu_processes() -> None:
    try:
        pl.Trainer(accelerator="cpu", devices=2, strategy="fsdp", logger=False)
    except ValueError as error:
        if "requires a GPU accelerator" in str(error):
            pytest.skip(f"pytorch-lightning {pl.__version__} runs FSDP only on CUDA GPUs: {error}")
        raise
    pytest.fail("Lightning now accepts FSDP on CPU: run a 2-process gloo fit here")
