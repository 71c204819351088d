"""A flag value starting with ``#`` (MRPC's ``#2 String`` column) is kept, not read as a YAML
comment that makes the option null."""

import csv
from pathlib import Path

import yaml
from jsonargparse import Namespace

from seqcls.classifier_cli import make_cli
from seqcls.run.checks.flag_values import given_values, keep_comment_like_values

REPO = Path(__file__).resolve().parents[2]


def test_given_values_reads_both_flag_forms() -> None:
    argv = ["fit", "--a.b", "#x", "--c=#y z", "--flag"]
    assert given_values(argv) == {"a.b": "#x", "c": "#y z"}


def test_only_nulls_that_were_given_a_hash_value_come_back() -> None:
    config = Namespace(subcommand="fit", fit=Namespace(data=Namespace(a=None, b=None, c="set")))
    keep_comment_like_values(config, ["fit", "--data.a", "#2 String", "--data.c", "#not null"])
    assert config.fit.data.a == "#2 String"
    assert config.fit.data.b is None  # not given
    assert config.fit.data.c == "set"  # the parser kept it: nothing to give back


def test_fit_trains_on_a_pair_column_named_with_a_hash(tiny_bert: Path, tmp_path: Path) -> None:
    table = tmp_path / "pairs.tsv"
    with table.open("w", newline="") as stream:
        writer = csv.writer(stream, delimiter="\t")
        writer.writerow(["Quality", "#1 String", "#2 String"])
        for row in range(8):
            writer.writerow([row % 2, f"first sentence {row}", f"second sentence {row}"])
    run = tmp_path / "run"
    make_cli(
        [
            "fit", "--model.model_name_or_path", str(tiny_bert),
            "--data.train_file", str(table), "--data.validation_file", str(table),
            "--data.text_column", "#1 String", "--data.text_pair_column", "#2 String",
            "--data.label_column", "Quality", "--data.cache_dir", str(tmp_path / "cache"),
            "--trainer.accelerator", "cpu", "--trainer.max_steps", "1",
            "--trainer.enable_progress_bar", "false", "--trainer.default_root_dir", str(run),
        ]
    )  # fmt: skip
    data = yaml.safe_load((run / "config.yaml").read_text())["data"]
    assert (data["text_column"], data["text_pair_column"]) == ("#1 String", "#2 String")
