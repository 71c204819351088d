"""``seqcls tune`` under DDP with two CPU processes (gloo): rank 0 samples, rank 1 follows."""

import csv
import re
from pathlib import Path

import yaml
from test_ddp import seqcls_in_two_processes

REPO = Path(__file__).resolve().parents[2]
SAMPLE = REPO / "data" / "sample"


def test_rank_0_samples_and_rank_1_runs_the_same_trials(tmp_path: Path, tiny_bert: Path) -> None:
    space = tmp_path / "space.yaml"
    space.write_text("model.learning_rate: {low: 1.0e-4, high: 3.0e-3, log: true}\n")
    run = tmp_path / "run"
    output = seqcls_in_two_processes(
        "tune",
        "--model.model_name_or_path", str(tiny_bert),
        "--data.train_file", str(SAMPLE / "train.csv"),
        "--data.validation_file", str(SAMPLE / "validation.csv"),
        "--data.max_train_samples", "32",
        "--data.batch_size", "8",
        "--data.cache_dir", str(tmp_path / "cache"),
        "--trainer.max_epochs", "1",
        "--trainer.default_root_dir", str(run),
        "--tune.space", str(space),
        "--tune.n_trials", "2",
        cwd=tmp_path,
    )  # fmt: skip
    assert output.count("Effective batch size 16 = 8 per device x 2 device(s)") == 2
    with (run / "trials.csv").open(newline="") as stream:
        trials = list(csv.DictReader(stream))
    assert [t["state"] for t in trials] == ["complete", "complete"]
    followed = re.findall(r"Rank 1 runs trial (\d+): --model.learning_rate (\S+)", output)
    assert len(followed) == 2
    for (number, rate), trial in zip(followed, trials, strict=True):
        config = yaml.safe_load(
            (run / "trials" / f"trial-{int(number):03d}" / "config.yaml").read_text()
        )
        assert config["model"]["learning_rate"] == float(rate)
        assert trial["trial"] == number
    assert not (run / "trials" / "trial-002").exists()
