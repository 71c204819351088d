"""The labels of a fine-tuned model, for commands given no training rows, and what a model
path that names none is instead (seqcls.data.model_files.model_label_space)."""

import json
from pathlib import Path

import pytest

from seqcls.data.model_files import model_label_space
from seqcls.errors import ConfigurationError

NO_LABELS = (
    "no train data: pass --data.train_file, or give --model.model_name_or_path a fine-tuned "
    "model, whose config.json names its labels"
)


def test_a_fine_tuned_models_labels_are_read_from_its_config(tmp_path: Path) -> None:
    config = {
        "id2label": {"0": "billing", "1": "shipping"},
        "architectures": ["BertForSequenceClassification"],
    }
    (tmp_path / "config.json").write_text(json.dumps(config))
    assert model_label_space(str(tmp_path)).names == ("billing", "shipping")


def test_a_model_folder_that_does_not_exist_is_said_to_be_missing(tmp_path: Path) -> None:
    missing = tmp_path / "nope" / "model"
    with pytest.raises(ConfigurationError) as error:
        model_label_space(str(missing))
    assert str(error.value) == (
        f"--model.model_name_or_path: cannot load '{missing}': no such directory; check the "
        "path, or give a hub id such as FacebookAI/roberta-base"
    )


def test_a_run_directory_or_a_checkpoint_points_at_what_to_give(tmp_path: Path) -> None:
    run = tmp_path / "run"
    (run / "model").mkdir(parents=True)
    with pytest.raises(ConfigurationError) as error:
        model_label_space(str(run))
    assert str(error.value) == (
        f"{NO_LABELS} ({run} names none; it is a run directory, whose exported model is "
        f"{run / 'model'})"
    )
    checkpoint = run / "last.ckpt"
    checkpoint.write_bytes(b"")
    with pytest.raises(ConfigurationError) as error:
        model_label_space(str(checkpoint))
    assert str(error.value) == (
        f"{NO_LABELS} ({checkpoint} names none; it is a checkpoint: give it as --ckpt_path, "
        "with --config RUN/config.yaml)"
    )
