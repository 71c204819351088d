"""Options filled in from another (the model's label space and window pooling from --data.*,
the tokenizer from the model) are refused by hand with one line naming the one to give."""

from pathlib import Path

import pytest

from seqcls.cli import main


@pytest.mark.parametrize(
    ("command", "given", "instead"),
    [
        ("validate", ["--model.window_pooling", "mean"], "window_pooling"),
        ("validate", ["--model.window_pooling=mean"], "window_pooling"),
        ("fit", ["--model.problem_type", "regression"], "problem_type"),
        ("fit", ["--model.label_names", "[billing, shipping]"], "label_names"),
        ("fit", ["--model.metrics=[accuracy]"], "metrics"),
        ("fit", ["--model.metrics+=accuracy"], "metrics"),
        ("test", ["--model.validation_names", "[val]"], "validation_names"),
    ],
)
def test_an_option_filled_in_from_the_data_names_the_data_option(
    tiny_bert: Path,
    tmp_path: Path,
    capsys: pytest.CaptureFixture[str],
    command: str,
    given: list[str],
    instead: str,
) -> None:
    with pytest.raises(SystemExit) as done:
        main([
            command,
            "--model.model_name_or_path", str(tiny_bert),
            *given,
            "--trainer.default_root_dir", str(tmp_path / "run"),
        ])  # fmt: skip
    assert done.value.code == 2
    err = capsys.readouterr().err
    assert "Traceback" not in err
    assert err.strip().splitlines()[-1] == (
        f"seqcls: error: --model.{instead} is filled in from the data; "
        f"give --data.{instead} instead"
    )
    assert not (tmp_path / "run").exists()


@pytest.mark.parametrize("command", [["validate"], ["mlm", "fit"]])
def test_the_tokenizer_filled_in_from_the_model_names_the_model_option(
    tiny_bert: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str], command: list[str]
) -> None:
    with pytest.raises(SystemExit) as done:
        main([
            *command,
            "--model.model_name_or_path", str(tiny_bert),
            "--data.tokenizer_name_or_path", str(tiny_bert),
            "--trainer.default_root_dir", str(tmp_path / "run"),
        ])  # fmt: skip
    assert done.value.code == 2
    assert capsys.readouterr().err.strip().splitlines()[-1] == (
        "seqcls: error: --data.tokenizer_name_or_path is filled in from the model; "
        "give --model.model_name_or_path instead"
    )


@pytest.mark.parametrize("form", ["--config {}", "--config={}"])
def test_a_config_file_that_sets_an_option_filled_in_from_the_data_is_refused(
    tiny_bert: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str], form: str
) -> None:
    config = tmp_path / "pooling.yaml"
    config.write_text("model:\n  window_pooling: max\n")
    with pytest.raises(SystemExit) as done:
        main([
            "fit",
            "--model.model_name_or_path", str(tiny_bert),
            *form.format(config).split(" "),
            "--trainer.default_root_dir", str(tmp_path / "run"),
        ])  # fmt: skip
    assert done.value.code == 2
    assert capsys.readouterr().err.strip().splitlines()[-1] == (
        f"seqcls: error: --config {config}: model.window_pooling is filled in from the data; "
        "give data.window_pooling instead"
    )
