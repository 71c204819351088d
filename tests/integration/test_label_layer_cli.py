"""Starting from a fine-tuned model through the real CLI: predicting with its labels in another
order keeps each label's scores, and a second task fit from it gets a new label layer and a
model card that names where its base came from."""

import csv
import logging
from pathlib import Path

import pytest
import yaml
from cli_runs import SAMPLE, read_rows
from test_cli_end_to_end import LABELS, fit_args

from seqcls.cli import main


@pytest.fixture(scope="module")
def base(tmp_path_factory: pytest.TempPathFactory, tiny_bert: Path) -> Path:
    """The tiny BERT with a model card that states a license, as a Hub model's does."""
    folder = tmp_path_factory.mktemp("base")
    for path in tiny_bert.iterdir():
        (folder / path.name).symlink_to(path)
    (folder / "README.md").write_text("---\nlicense: apache-2.0\n---\n# A base model\n")
    return folder


@pytest.fixture(scope="module")
def run(tmp_path_factory: pytest.TempPathFactory, base: Path) -> Path:
    run_dir = tmp_path_factory.mktemp("run")
    main(fit_args(run_dir, base, run_dir.parent / "cache", "--trainer.max_epochs", "2"))
    return run_dir


def predict_from_export(run: Path, out: Path, labels: list[str]) -> list[dict[str, str]]:
    main([
        "predict", "--config", str(run / "config.yaml"),
        "--model.model_name_or_path", str(run / "model"),
        "--data.label_names", f"[{', '.join(labels)}]",
        "--data.predict_file", str(SAMPLE / "predict.csv"),
        "--trainer.default_root_dir", str(out),
    ])  # fmt: skip
    return read_rows(out / "predictions.csv")


def test_labels_in_another_order_keep_their_scores(run: Path, tmp_path: Path) -> None:
    same = predict_from_export(run, tmp_path / "same", LABELS)
    reversed_labels = LABELS[::-1]
    reordered = predict_from_export(run, tmp_path / "reordered", reversed_labels)
    assert len(same) == len(reordered) > 0
    for before, after in zip(same, reordered, strict=True):
        assert after["label"] == before["label"]
        for name in LABELS:
            assert float(after[f"score_{name}"]) == pytest.approx(
                float(before[f"score_{name}"]), abs=1e-6
            )
    # The scores differ between labels, so a swapped layer could not pass unseen.
    spread = {round(float(same[0][f"score_{name}"]), 4) for name in LABELS}
    assert len(spread) == len(LABELS)


def test_a_second_task_gets_a_new_label_layer_and_names_its_lineage(
    run: Path, base: Path, tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    # The second task: the same texts, two labels instead of four.
    topic = {"account": "money", "billing": "money", "shipping": "goods", "technical": "goods"}
    for split in ["train", "validation"]:
        rows = read_rows(SAMPLE / f"{split}.csv")
        with (tmp_path / f"{split}.csv").open("w", newline="") as out:
            writer = csv.DictWriter(out, fieldnames=["text", "label"])
            writer.writeheader()
            writer.writerows({"text": row["text"], "label": topic[row["label"]]} for row in rows)
    second = tmp_path / "second"
    args = fit_args(second, run / "model", tmp_path / "cache", "--trainer.max_epochs", "1")
    args[args.index(str(SAMPLE / "train.csv"))] = str(tmp_path / "train.csv")
    args[args.index(str(SAMPLE / "validation.csv"))] = str(tmp_path / "validation.csv")
    with caplog.at_level(logging.INFO, logger="seqcls.model.label_layer"):
        main(args)
    assert (
        f"--model.model_name_or_path {run / 'model'} is a classifier of "
        f"[{', '.join(LABELS)}], and this run's labels are [goods, money]: a new label layer"
    ) in caplog.messages
    _, front, body = (second / "model" / "README.md").read_text().split("---\n", 2)
    meta = yaml.safe_load(front)
    assert meta["base_model"] == str(run / "model")
    assert meta["license"] == "apache-2.0"  # the first fit's card carried the base model's
    assert f"`{run / 'model'}` was itself fine-tuned from `{base}`." in body
