"""Predicting with a fine-tuned model given its labels in another order, through the real CLI:
each label keeps its own scores, since the label layer's rows follow the names."""

from pathlib import Path

import pytest
from test_cli_end_to_end import LABELS, SAMPLE, fit_args, read_rows

from seqcls.cli import main


@pytest.fixture(scope="module")
def run(tmp_path_factory: pytest.TempPathFactory, tiny_bert: Path) -> Path:
    run_dir = tmp_path_factory.mktemp("run")
    main(fit_args(run_dir, tiny_bert, run_dir.parent / "cache", "--trainer.max_epochs", "2"))
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
