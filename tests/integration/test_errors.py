"""Mistakes a user can fix end in one line naming the culprit, never a traceback."""

import importlib.util
import subprocess
import sys
from pathlib import Path

import pytest
import torch
from pytorch_lightning.accelerators import XLAAccelerator
from transformers import AutoModelForSequenceClassification, AutoTokenizer

from seqcls.cli import main
from seqcls.errors import ConfigurationError
from seqcls.run.checks.command_line import check_max_length

REPO = Path(__file__).resolve().parents[2]
SAMPLE = REPO / "data" / "sample"


def fit_error(
    capsys: pytest.CaptureFixture[str],
    model: Path,
    tmp_path: Path,
    *extra: str,
    at_setup: bool = False,
) -> str:
    """The last line of a fit that stops on a mistake. ``at_setup``: found once the data is
    tokenized, after the logger has made its folder, but still before any checkpoint."""
    with pytest.raises(SystemExit) as done:
        main([
            "fit", "--config", str(REPO / "configs/local.yaml"),
            "--model.model_name_or_path", str(model),
            "--data.train_file", str(SAMPLE / "train.csv"),
            "--data.validation_file", str(SAMPLE / "validation.csv"),
            "--data.cache_dir", str(tmp_path / "cache"),
            "--trainer.default_root_dir", str(tmp_path / "run"),
            "--trainer.max_epochs", "1",
            *extra,
        ])  # fmt: skip
    assert done.value.code == 2
    lines = capsys.readouterr().err.strip().splitlines()
    assert "Traceback" not in "\n".join(lines)
    # Nothing half-written: the run directory is only created once the data checks pass.
    assert not (tmp_path / "run").exists() or at_setup
    assert not (tmp_path / "run" / "checkpoints").exists()
    assert not (tmp_path / "run" / "metrics.json").exists()
    return lines[-1]


def test_missing_train_file(capsys, tiny_bert: Path, tmp_path: Path) -> None:
    line = fit_error(capsys, tiny_bert, tmp_path, "--data.train_file", "nope/train.csv")
    assert line == "seqcls: error: --data.train_file: file not found: nope/train.csv"


def test_missing_column(capsys, tiny_bert: Path, tmp_path: Path) -> None:
    line = fit_error(capsys, tiny_bert, tmp_path, "--data.text_column", "sentence")
    assert "'sentence' (--data.text_column)" in line
    assert "['text', 'label']" in line


def test_validation_label_never_seen_in_training(capsys, tiny_bert: Path, tmp_path: Path) -> None:
    dev = tmp_path / "dev.csv"
    dev.write_text("text,label\nwhere is my refund,refunds\n")
    line = fit_error(capsys, tiny_bert, tmp_path, "--data.validation_file", str(dev))
    assert "dev.csv, column 'label'" in line
    assert "'refunds'" in line


def test_rows_are_numbered_as_predictions_number_them(
    capsys, tiny_bert: Path, tmp_path: Path
) -> None:
    dev = tmp_path / "dev.csv"
    dev.write_text("text,label\nwhere is my refund,billing\n,billing\n")
    line = fit_error(capsys, tiny_bert, tmp_path, "--data.validation_file", str(dev))
    assert line == (
        f"seqcls: error: {dev}: column 'text' row 1 (counted from 0 after the header) is "
        "empty (a blank line is a row of empty cells); fill or drop that row"
    )
    dev.write_text("text,label\nwhere is my refund,billing\nmy card,\n")
    line = fit_error(capsys, tiny_bert, tmp_path, "--data.validation_file", str(dev))
    assert line == (
        f"seqcls: error: {dev}, column 'label': empty or NaN label in row(s) 1 (counted from 0 "
        "after the header); every row needs a label"
    )


def test_empty_validation_split(capsys, tiny_bert: Path, tmp_path: Path) -> None:
    dev = tmp_path / "dev.csv"
    dev.write_text("text,label\n")
    line = fit_error(capsys, tiny_bert, tmp_path, "--data.validation_file", str(dev))
    assert line.startswith("seqcls: error: --data.validation_file: ")
    assert "has no rows" in line


def test_an_empty_json_lines_file(capsys, tiny_bert: Path, tmp_path: Path) -> None:
    dev = tmp_path / "dev.jsonl"
    dev.write_text("")
    line = fit_error(capsys, tiny_bert, tmp_path, "--data.validation_file", str(dev))
    assert line == (
        f"seqcls: error: --data.validation_file: {dev} has no rows; give a file with at least "
        "one example"
    )


def test_a_training_file_with_one_class(capsys, tiny_bert: Path, tmp_path: Path) -> None:
    train = tmp_path / "one.csv"
    train.write_text("text,label\n" + "".join(f"row {i},billing\n" for i in range(12)))
    line = fit_error(capsys, tiny_bert, tmp_path, "--data.train_file", str(train))
    assert line == (
        f"seqcls: error: {train}, column 'label': single-label classification needs at least 2 "
        "label(s), found 1: 'billing'; add rows of another class, or give --data.label_names "
        "with every class"
    )


def test_model_that_cannot_be_loaded(capsys, tiny_bert: Path, tmp_path: Path) -> None:
    line = fit_error(capsys, tiny_bert, tmp_path, "--model.model_name_or_path", "no/such-model")
    assert "cannot load 'no/such-model'" in line
    assert "local model directory" in line


def test_console_script_prints_one_line_and_exits_2(tmp_path: Path) -> None:
    script = Path(sys.executable).with_name("seqcls")
    result = subprocess.run(
        [str(script), "fit", "--config", "configs/local.yaml", "--data.train_file", "missing.csv"],
        cwd=REPO,
        capture_output=True,
        text=True,
        timeout=120,
        env={"PATH": str(script.parent), "HF_HUB_OFFLINE": "1", "SEQCLS_CACHE": str(tmp_path)},
    )
    assert result.returncode == 2
    assert "Traceback" not in result.stderr
    assert result.stderr.strip().splitlines()[-1] == (
        "seqcls: error: --data.train_file: file not found: missing.csv"
    )


def test_unknown_option_suggests_the_closest(capsys, tiny_bert: Path, tmp_path: Path) -> None:
    line = fit_error(capsys, tiny_bert, tmp_path, "--trainer.max_epohcs", "2")
    assert line == (
        "seqcls: error: --trainer.max_epohcs: unknown option; did you mean "
        "--trainer.max_epochs? (seqcls fit --help lists every option)"
    )


def test_abbreviated_options_are_refused(capsys, tiny_bert: Path, tmp_path: Path) -> None:
    line = fit_error(capsys, tiny_bert, tmp_path, "--trainer.max_epoch", "2")
    assert line.startswith("seqcls: error: --trainer.max_epoch: unknown option; did you mean ")
    assert "--trainer.max_epochs?" in line


def test_unknown_key_in_a_config_file(capsys, tiny_bert: Path, tmp_path: Path) -> None:
    config = tmp_path / "mine.yaml"
    config.write_text("data:\n  batch_sise: 8\n")
    line = fit_error(capsys, tiny_bert, tmp_path, "--config", str(config))
    assert line.startswith("seqcls: error: data.batch_sise: unknown key in a --config file; ")
    assert "did you mean data.batch_size?" in line


def test_a_value_outside_the_choices(capsys, tiny_bert: Path, tmp_path: Path) -> None:
    line = fit_error(capsys, tiny_bert, tmp_path, "--data.output_format", "xml")
    assert line == "seqcls: error: --data.output_format xml: expected one of csv, jsonl, glue"


def test_a_glue_file_for_local_files_needs_the_task(
    capsys, tiny_bert: Path, tmp_path: Path
) -> None:
    line = fit_error(capsys, tiny_bert, tmp_path, "--data.output_format", "glue")
    assert line == (
        "seqcls: error: --data.dataset_config: not set, and a GLUE submission file is per "
        "task; name it with --data.dataset_config, one of cola, sst2, mrpc, qqp, stsb, mnli, "
        "qnli, rte, wnli, ax"
    )


def test_a_checkpoint_that_does_not_exist(capsys, tiny_bert: Path, tmp_path: Path) -> None:
    missing = tmp_path / "best.ckpt"
    with pytest.raises(SystemExit) as done:
        main([
            "validate", "--model.model_name_or_path", str(tiny_bert),
            "--data.train_file", str(SAMPLE / "train.csv"),
            "--data.validation_file", str(SAMPLE / "validation.csv"),
            "--trainer.default_root_dir", str(tmp_path / "run"), "--ckpt_path", str(missing),
        ])  # fmt: skip
    assert done.value.code == 2
    error = capsys.readouterr().err
    assert "Traceback" not in error
    assert (
        error.strip().splitlines()[-1] == f"seqcls: error: --ckpt_path: file not found: {missing}"
    )


def test_wrong_type(capsys, tiny_bert: Path, tmp_path: Path) -> None:
    line = fit_error(capsys, tiny_bert, tmp_path, "--trainer.max_epochs", "three")
    assert line == "seqcls: error: --trainer.max_epochs three: expected int or null"


def test_gpu_config_without_a_gpu(capsys, tiny_bert: Path, tmp_path: Path) -> None:
    if torch.cuda.is_available():
        pytest.skip("this machine has a GPU")
    gpu = str(REPO / "configs/trainer/gpu.yaml")
    line = fit_error(capsys, tiny_bert, tmp_path, "--config", gpu)
    assert line.startswith("seqcls: error: --trainer.accelerator gpu: this machine has no CUDA GPU")
    assert "--config configs/trainer/cpu.yaml" in line


def test_fsdp_config_on_the_cpu(capsys, tiny_bert: Path, tmp_path: Path) -> None:
    stack = [str(REPO / f"configs/trainer/{name}.yaml") for name in ("gpu", "fsdp", "cpu")]
    # The stack a user tries after the GPU line's hint: FSDP still asks for CUDA GPUs.
    line = fit_error(capsys, tiny_bert, tmp_path, *(a for c in stack for a in ("--config", c)))
    assert line == (
        "seqcls: error: --trainer.strategy pytorch_lightning.strategies.FSDPStrategy: FSDP "
        "shards the model across CUDA GPUs, and this run has none (--trainer.accelerator cpu); "
        "to train on the CPU, drop FSDP (configs/trainer/fsdp.yaml or --trainer.strategy)"
    )


def test_deepspeed_config_without_deepspeed(capsys, tiny_bert: Path, tmp_path: Path) -> None:
    if importlib.util.find_spec("deepspeed") is not None:
        pytest.skip("DeepSpeed is installed here (its lane, scripts/test.sh --deepspeed)")
    deepspeed = str(REPO / "configs/trainer/deepspeed.yaml")
    on_cpu = ("--trainer.accelerator", "cpu")  # past the GPU check, to the strategy's
    line = fit_error(capsys, tiny_bert, tmp_path, "--config", deepspeed, *on_cpu)
    assert line.startswith("seqcls: error: --trainer.strategy pytorch_lightning.strategies.")
    assert "pip install 'seqcls[deepspeed]'" in line


def test_tpu_config_without_a_tpu(capsys, tiny_bert: Path, tmp_path: Path) -> None:
    if XLAAccelerator.is_available():
        pytest.skip("this machine has a TPU")
    tpu = str(REPO / "configs/trainer/tpu.yaml")
    line = fit_error(capsys, tiny_bert, tmp_path, "--config", tpu)
    assert line.startswith("seqcls: error: --trainer.accelerator tpu: this machine has no TPU (")
    assert "--config configs/trainer/cpu.yaml" in line


def test_a_malformed_secret_name_stops_before_training(
    capsys, monkeypatch: pytest.MonkeyPatch, tiny_bert: Path, tmp_path: Path
) -> None:
    """SEQCLS_SECRET_* variables are read when a command starts (seqcls/cloud/secrets.py)."""
    monkeypatch.setenv("SEQCLS_SECRET_HF_TOKEN", "hf-token")
    line = fit_error(capsys, tiny_bert, tmp_path)
    assert line == (
        "seqcls: error: SEQCLS_SECRET_HF_TOKEN=hf-token: expected "
        "projects/PROJECT/secrets/SECRET/versions/VERSION (VERSION may be latest)"
    )


# Each was a traceback from torch (learning rate, betas, epsilon, workers) or a run that
# trained quietly on nonsense (the others) before option_ranges.py.
@pytest.mark.parametrize(
    ("flag", "value", "message"),
    [
        ("--data.batch_size", "0", "give a value of at least 1, e.g. 32"),
        ("--model.learning_rate", "-1", "give a value above 0, e.g. 5e-5"),
        ("--model.head_learning_rate", "0", "give a value above 0, e.g. 1e-3"),
        ("--model.adam_betas", "[0.9, 1.5]", "give 2 values in [0, 1), e.g. [0.9, 0.999]"),
        ("--model.adam_epsilon", "-0.5", "give a value of at least 0, e.g. 1e-8"),
        ("--model.weight_decay", "-0.1", "give a value of at least 0, e.g. 0.01"),
        ("--model.warmup_ratio", "1.5", "give a value in [0, 1], e.g. 0.1"),
        ("--model.layer_lr_decay", "0", "give a value in (0, 1], e.g. 0.9"),
        ("--data.max_train_samples", "0", "give a value of at least 1, e.g. 1000"),
        ("--data.train_fraction", "0", "give a value in (0, 1], e.g. 0.5"),
        ("--data.num_workers", "-1", "give a value of at least 0, e.g. 2"),
    ],
)
def test_a_value_out_of_range_stops_before_any_work(
    capsys, tiny_bert: Path, tmp_path: Path, flag: str, value: str, message: str
) -> None:
    line = fit_error(capsys, tiny_bert, tmp_path, flag, value)
    assert line == f"seqcls: error: {flag} {value}: {message}"


def test_periodic_checkpoint_interval_must_be_positive(
    capsys, tiny_bert: Path, tmp_path: Path
) -> None:
    line = fit_error(capsys, tiny_bert, tmp_path, "--last_checkpoint.every_minutes", "0")
    assert line == (
        "seqcls: error: --last_checkpoint.every_minutes 0.0: must be positive, "
        "or null to switch it off"
    )


def test_max_length_beyond_the_model_positions(capsys, tiny_bert: Path, tmp_path: Path) -> None:
    line = fit_error(capsys, tiny_bert, tmp_path, "--data.max_length", "4096")
    assert line.startswith("seqcls: error: --data.max_length 4096 is longer than the model takes")


def test_a_file_whose_rows_all_go_to_validation(capsys, tiny_bert: Path, tmp_path: Path) -> None:
    one_row = tmp_path / "one.csv"
    one_row.write_text("text,label\nwhere is my refund,refunds\n")
    with pytest.raises(SystemExit) as done:
        main([
            "fit", "--model.model_name_or_path", str(tiny_bert),
            "--data.train_file", str(one_row), "--data.cache_dir", str(tmp_path / "cache"),
            # Both classes named: one class found in the data alone is refused first.
            "--data.label_names", "[refunds, other]",
            "--trainer.default_root_dir", str(tmp_path / "run"), "--trainer.max_epochs", "1",
        ])  # fmt: skip
    assert done.value.code == 2
    assert capsys.readouterr().err.strip().splitlines()[-1] == (
        f"seqcls: error: --data.train_file {one_row}: no rows left to train on, all held out "
        "for validation; give a file with more rows, or a --data.validation_file"
    )
    assert not (tmp_path / "run" / "model").exists()


def test_max_length_too_short_for_any_text(capsys, tiny_bert: Path, tmp_path: Path) -> None:
    line = fit_error(capsys, tiny_bert, tmp_path, "--data.max_length", "2")
    assert line == (
        "seqcls: error: --data.max_length 2 leaves no room for text: this tokenizer adds 2 "
        "special tokens to each row; give 3 or more, e.g. 128"
    )


def test_the_shortest_max_length_counts_both_texts_of_a_pair(tiny_bert: Path) -> None:
    tokenizer = AutoTokenizer.from_pretrained(tiny_bert)
    model = AutoModelForSequenceClassification.from_pretrained(tiny_bert, num_labels=2)
    check_max_length(3, tokenizer, model)  # [CLS] one token [SEP]
    check_max_length(5, tokenizer, model, pairs=True)  # [CLS] a [SEP] b [SEP]
    with pytest.raises(ConfigurationError, match=r"adds 3 special tokens to each pair; give 5"):
        check_max_length(4, tokenizer, model, pairs=True)


def test_model_directory_that_does_not_exist(capsys, tiny_bert: Path, tmp_path: Path) -> None:
    missing = str(tmp_path / "models" / "mine")
    line = fit_error(capsys, tiny_bert, tmp_path, "--model.model_name_or_path", missing)
    assert line == (
        f"seqcls: error: --model.model_name_or_path: cannot load {missing!r}: no such "
        "directory; check the path, or give a hub id such as FacebookAI/roberta-base"
    )


def test_hub_id_offline_names_the_offline_mode(capsys, tiny_bert: Path, tmp_path: Path) -> None:
    line = fit_error(capsys, tiny_bert, tmp_path, "--model.model_name_or_path", "someone/mine")
    assert (
        "cannot load 'someone/mine': not a local directory, and not in the Hugging Face cache"
        in (line)
    )
    assert "HF_HUB_OFFLINE is set, so the hub is not asked" in line


def test_a_mistyped_model_folder_is_named_without_asking_the_hub(
    capsys, tiny_bert: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # "models/my-modle" could be a hub id (owner/name), but models/ is a folder here: the
    # name is a path, and the run stops at once instead of retrying the hub.
    (tmp_path / "models" / "my-model").mkdir(parents=True)
    monkeypatch.chdir(tmp_path)
    monkeypatch.delenv("HF_HUB_OFFLINE", raising=False)
    line = fit_error(capsys, tiny_bert, tmp_path, "--model.model_name_or_path", "models/my-modle")
    assert line == (
        "seqcls: error: --model.model_name_or_path: cannot load 'models/my-modle': no such "
        "directory (models/ is a folder here, so the name is a path, not a hub id); did you "
        "mean models/my-model? (check the path, or run where no models/ folder is to load the "
        "hub id)"
    )


def test_class_weights_of_the_wrong_length(capsys, tiny_bert: Path, tmp_path: Path) -> None:
    line = fit_error(capsys, tiny_bert, tmp_path, "--model.class_weights", "[1, 2]")
    assert line.startswith("seqcls: error: --model.class_weights [1.0, 2.0]: 2 weights for 4 ")


def test_a_validation_interval_longer_than_an_epoch(
    capsys: pytest.CaptureFixture[str], tiny_bert: Path, tmp_path: Path
) -> None:
    """Lightning raised its own ValueError, with a traceback, at the fit loop's start."""
    line = fit_error(
        capsys, tiny_bert, tmp_path, "--data.max_train_samples", "64",
        "--trainer.val_check_interval", "1000", at_setup=True,
    )  # fmt: skip
    assert line == (
        "seqcls: error: --trainer.val_check_interval 1000: more than the 4 training batches of "
        "an epoch; give at most 4, a share of an epoch such as 0.25, or add "
        "--trainer.check_val_every_n_epoch null to count batches across epochs"
    )


@pytest.mark.parametrize("monitor", ["val/f2", "accuracy"])
def test_a_monitored_metric_that_no_validation_logs(
    capsys, tiny_bert: Path, tmp_path: Path, monitor: str
) -> None:
    # Found when the model is built, not at the first validation after training.
    line = fit_error(capsys, tiny_bert, tmp_path, "--checkpoint.monitor", monitor)
    assert line == (
        f"seqcls: error: --checkpoint.monitor {monitor}: not logged at validation; choose one of "
        "val/accuracy, val/loss, val/macro_f1"
    )


@pytest.mark.parametrize("flag", ["--trainer.max_epochs", "--trainer.max_steps"])
def test_a_fit_of_nothing(capsys, tiny_bert: Path, tmp_path: Path, flag: str) -> None:
    line = fit_error(capsys, tiny_bert, tmp_path, flag, "0")
    assert line == (
        f"seqcls: error: {flag} 0: the fit would train nothing and export the untrained model; "
        f"give {flag} 1 or more"
    )


def test_a_config_file_that_is_not_yaml_is_named(capsys, tiny_bert: Path, tmp_path: Path) -> None:
    # The parser's own message names "<unicode string>", whichever stacked file it was.
    broken = tmp_path / "mine.yaml"
    broken.write_text("data:\n  batch_size: [1, 2\n")
    line = fit_error(capsys, tiny_bert, tmp_path, "--config", str(broken))
    assert line == (
        f"seqcls: error: --config {broken}: not valid YAML at line 3, column 1: expected ',' "
        "or ']', but got '<stream end>'"
    )
    assert not (tmp_path / "run").exists()
