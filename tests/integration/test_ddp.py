"""DDP with two CPU processes (gloo) through the real CLI: exact metrics, one predictions file.

The row counts are odd on purpose: a DistributedSampler would pad the last round with a
repeated row, and metrics or predictions that counted it would differ from one process.
"""

from pathlib import Path

import pytest
from cli_runs import (
    DDP,
    QUIET,
    SAMPLE,
    first_rows,
    read_rows,
    run_metrics,
    seqcls_bounded,
    seqcls_output,
)
from transformers import AutoTokenizer

from seqcls.cli import main

TIMEOUT_S = 420


def seqcls_in_two_processes(*args: str, cwd: Path) -> str:
    """Run ``seqcls`` under DDP in its own process group, killed whole if it overruns."""
    return seqcls_output([*args, *DDP, *QUIET], timeout_s=TIMEOUT_S, cwd=cwd)


def validate_and_predict_both_ways(
    args: list[str], predict_file: str, work: Path, name: str
) -> None:
    """``validate`` and ``predict`` (of ``predict_file``) with ``args``, under DDP and in one
    process; each writes to ``work/NAME-COMMAND-ddp`` or ``work/NAME-COMMAND-one``."""
    for command, extra in [("validate", []), ("predict", ["--data.predict_file", predict_file])]:
        seqcls_in_two_processes(
            command, *args, *extra,
            "--trainer.default_root_dir", str(work / f"{name}-{command}-ddp"),
            cwd=work,
        )  # fmt: skip
        main([
            command, *args, *extra, "--trainer.devices", "1", "--trainer.strategy", "auto",
            *QUIET, "--trainer.default_root_dir", str(work / f"{name}-{command}-one"),
        ])  # fmt: skip


@pytest.fixture(scope="module")
def ddp_run(tmp_path_factory: pytest.TempPathFactory, tiny_bert: Path) -> Path:
    work = tmp_path_factory.mktemp("ddp")
    output = seqcls_in_two_processes(
        "fit",
        "--model.model_name_or_path", str(tiny_bert),
        "--data.train_file", str(SAMPLE / "train.csv"),
        "--data.validation_file", first_rows(SAMPLE / "validation.csv", work / "dev.csv", 99),
        "--data.max_train_samples", "64",
        "--data.batch_size", "8",
        # Every batch packed (config.yaml keeps it for validate and predict): the exact metrics
        # and the input order must hold for packed batches, which the default may choose.
        "--data.packing", "true",
        "--data.cache_dir", str(work / "cache"),
        "--trainer.max_epochs", "1",
        "--trainer.default_root_dir", str(work / "run"),
        cwd=work,
    )  # fmt: skip
    assert "Effective batch size 16 = 8 per device x 2 device(s) x 1 node(s)" in output
    (work / "output.log").write_text(output)
    return work


def test_ddp_tokenizes_once_per_node(ddp_run: Path) -> None:
    """One process per node tokenizes each split into the cache; every rank then reads it."""
    lines = (ddp_run / "output.log").read_text().splitlines()

    def flags(event: str) -> list[str]:
        """The split flag of each log line that reports ``event``, from both processes."""
        return sorted(line.split(": ")[1] for line in lines if f": {event} " in line)

    splits = ["--data.train_file", "--data.validation_file"]
    assert flags("tokenizing") == splits
    # Both processes' logs are here: rank 0 tokenized (and names each entry once), rank 1
    # read both splits from the cache.
    assert flags("using cached tokens") == splits


def test_ddp_validation_metrics_equal_one_process_on_the_same_checkpoint(ddp_run: Path) -> None:
    run = ddp_run / "run"
    last = str(run / "checkpoints" / "last.ckpt")
    seqcls_in_two_processes(
        "validate", "--config", str(run / "config.yaml"), "--ckpt_path", last,
        "--trainer.default_root_dir", str(ddp_run / "validate-ddp"),
        cwd=ddp_run,
    )  # fmt: skip
    main([
        "validate", "--config", str(run / "config.yaml"), "--ckpt_path", last,
        "--trainer.devices", "1", "--trainer.strategy", "auto", *QUIET,
        "--trainer.default_root_dir", str(ddp_run / "validate-one"),
    ])  # fmt: skip
    one = run_metrics(ddp_run / "validate-one")["validation"]
    assert set(one) == {
        "accuracy", "macro_f1", "loss", "ece", "ece_calibrated",
        "majority_class_accuracy", "largest_predicted_share",
    }  # fmt: skip
    # The fit's own end-of-epoch validation (2 processes) scored the same weights; its
    # temperature was fitted on the 99 rows gathered from both processes.
    for measured in (
        run_metrics(ddp_run / "validate-ddp")["validation"],
        run_metrics(run)["validation"],
    ):
        assert {key: measured[key] for key in one} == pytest.approx(one, abs=1e-6)
    for out in (run, ddp_run / "validate-ddp", ddp_run / "validate-one"):
        per_class = read_rows(out / "report" / "validation" / "per_class.csv")
        assert per_class[-1]["label"] == "weighted avg"
        assert int(per_class[-1]["support"]) == 99  # each row once, none repeated by the sampler
    two = (ddp_run / "validate-ddp" / "report" / "validation" / "per_class.csv").read_text()
    assert two == (ddp_run / "validate-one" / "report" / "validation" / "per_class.csv").read_text()


def test_ddp_predict_writes_one_file_one_row_per_input_in_order(ddp_run: Path) -> None:
    run = ddp_run / "run"
    predict = [
        "predict", "--config", str(run / "config.yaml"),
        "--ckpt_path", str(run / "checkpoints" / "last.ckpt"),
        "--data.predict_file", first_rows(SAMPLE / "predict.csv", ddp_run / "new.csv", 39),
        "--data.eval_batch_size", "4",
    ]  # fmt: skip
    seqcls_in_two_processes(
        *predict, "--trainer.default_root_dir", str(ddp_run / "predict-ddp"), cwd=ddp_run
    )
    main([
        *predict, "--trainer.devices", "1", "--trainer.strategy", "auto", *QUIET,
        "--trainer.default_root_dir", str(ddp_run / "predict-one"),
    ])  # fmt: skip
    written = sorted(p.name for p in (ddp_run / "predict-ddp").glob("predictions*"))
    assert written == ["predictions.csv"]  # one file, not one per rank
    two = read_rows(ddp_run / "predict-ddp" / "predictions.csv")
    one = read_rows(ddp_run / "predict-one" / "predictions.csv")
    assert [row["index"] for row in two] == [str(i) for i in range(39)]
    assert [row["label"] for row in two] == [row["label"] for row in one]
    assert [float(row["score"]) for row in two] == pytest.approx(
        [float(row["score"]) for row in one], abs=1e-5
    )


def test_ddp_windows_score_each_document_once_in_input_order(ddp_run: Path) -> None:
    """Long inputs as windows: whole documents per batch and per process, so metrics and
    predictions under DDP equal one process's, one row per input."""
    run = ddp_run / "run"
    windows = [
        "--config", str(run / "config.yaml"),
        "--ckpt_path", str(run / "checkpoints" / "last.ckpt"),
        "--data.max_length", "16",
        "--data.window_stride", "5",
        "--data.eval_batch_size", "3",
        # Packed, as config.yaml keeps it from the fit: windows of several documents share
        # model rows, and each rank packs other documents together than one process does.
    ]  # fmt: skip
    predict_file = first_rows(SAMPLE / "predict.csv", ddp_run / "long.csv", 39)
    validate_and_predict_both_ways(windows, predict_file, ddp_run, "windows")
    one = run_metrics(ddp_run / "windows-validate-one")["validation"]
    assert run_metrics(ddp_run / "windows-validate-ddp")["validation"] == pytest.approx(
        one, abs=1e-6
    )
    # Most inputs are longer than one window of 14 text tokens.
    tokenizer = AutoTokenizer.from_pretrained(run / "model")
    lengths = [len(tokenizer(row["text"])["input_ids"]) for row in read_rows(Path(predict_file))]
    assert sum(length > 16 for length in lengths) > len(lengths) / 2
    two = read_rows(ddp_run / "windows-predict-ddp" / "predictions.csv")
    alone = read_rows(ddp_run / "windows-predict-one" / "predictions.csv")
    assert [row["index"] for row in two] == [str(i) for i in range(39)]
    assert [row["label"] for row in two] == [row["label"] for row in alone]
    assert [float(row["score"]) for row in two] == pytest.approx(
        [float(row["score"]) for row in alone], abs=1e-5
    )


def test_ddp_too_few_rows_to_score_is_said_once(ddp_run: Path) -> None:
    """Each process finds that one row cannot be shared by two; rank 0 alone says so."""
    run = ddp_run / "run"
    done = seqcls_bounded(
        [
            "validate", "--config", str(run / "config.yaml"),
            "--ckpt_path", str(run / "checkpoints" / "last.ckpt"),
            "--data.validation_file", first_rows(SAMPLE / "validation.csv", ddp_run / "one.csv", 1),
            "--trainer.default_root_dir", str(ddp_run / "too-few"),
            *DDP, *QUIET,
        ],
        timeout_s=TIMEOUT_S, cwd=ddp_run,
    )  # fmt: skip
    assert done.returncode == 2, done.stdout[-3000:]
    errors = [line for line in done.stdout.splitlines() if line.startswith("seqcls: error:")]
    assert errors == [
        "seqcls: error: 1 row(s) to score for 2 processes, and each process needs one: "
        "give at least 2 rows, or run with fewer --trainer.devices"
    ]
