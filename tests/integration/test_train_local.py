"""The README's first command, for real: the packaged MiniLM on the sample data."""

import json
import os
import subprocess
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]


def test_train_local_script_fine_tunes_the_quickstart_model(tmp_path: Path) -> None:
    run = tmp_path / "quickstart"
    # One epoch instead of three keeps the suite fast; the data, model and settings are the
    # quickstart's own.
    result = subprocess.run(
        ["bash", "scripts/train-local.sh", "--trainer.max_epochs", "1",
         "--trainer.default_root_dir", str(run)],
        cwd=REPO,
        capture_output=True,
        text=True,
        timeout=600,
        env={**os.environ, "SEQCLS_CACHE": str(tmp_path / "cache")},
    )  # fmt: skip
    assert result.returncode == 0, result.stderr[-3000:]
    output = result.stdout + result.stderr
    assert "Validation metrics of model/ (best checkpoint, step " in output
    assert f"Run directory: {run}" in output
    # The libraries' chatter stays out (seqcls.run.outputs.quiet), and the sample's validation rows
    # are none of them training rows.
    for chatter in ("Loading weights", "Writing model shards", "💡 Tip", "LeafSpec"):
        assert chatter not in output
    assert "have the same tokens as a training row" not in output
    metrics = json.loads((run / "metrics.json").read_text())
    assert metrics["validation"]["accuracy"] >= 0.85
    config = json.loads((run / "model" / "config.json").read_text())
    assert config["model_type"] == "bert"
    assert sorted(config["id2label"].values()) == ["account", "billing", "shipping", "technical"]
