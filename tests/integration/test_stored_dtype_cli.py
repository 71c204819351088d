"""A fit from a checkpoint stored in fp16, through the real CLI: the run trains, checkpoints and
exports fp32 weights (transformers 5 alone would keep the stored fp16)."""

import json
from pathlib import Path

import pytest
import torch
from safetensors.torch import load_file
from test_cli_end_to_end import fit_args
from tiny_models import stored_in

from seqcls.cli import main


def test_a_half_precision_checkpoint_trains_and_exports_fp32_weights(
    tmp_path: Path, tiny_bert: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    stored = stored_in(torch.float16, tiny_bert, tmp_path / "stored-fp16")
    run = tmp_path / "run"

    main(fit_args(run, stored, tmp_path / "cache"))

    checkpoint = torch.load(
        next((run / "checkpoints").rglob("*.ckpt")), map_location="cpu", weights_only=False
    )
    assert {tensor.dtype for tensor in checkpoint["state_dict"].values()} == {torch.float32}
    exported = load_file(run / "model" / "model.safetensors")
    assert {tensor.dtype for tensor in exported.values()} == {torch.float32}
    assert json.loads((run / "model" / "config.json").read_text())["dtype"] == "float32"
