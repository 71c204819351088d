"""``validate`` again in a fit's run directory: ``metrics.json``'s ``evaluations`` entry and its
``report/NAME/`` folder describe the same, latest evaluation (run/outputs/evaluations.py); the fit's
own report stays as it was."""

import json
from pathlib import Path

from cli_runs import QUIET, SAMPLE, sample_fit

from seqcls.cli import main


def folders(path: Path) -> set[str]:
    return {child.name for child in path.iterdir()}


def test_a_later_evaluation_leaves_no_folder_of_the_earlier_in_its_report(
    tmp_path: Path, tiny_bert: Path
) -> None:
    run = tmp_path / "run"
    main(sample_fit(
        run, tiny_bert,
        "--data.max_train_samples", "32",
        "--data.cache_dir", str(tmp_path / "cache"),
        "--trainer.max_epochs", "1",
    ))  # fmt: skip
    fits_report = {p.name: p.read_bytes() for p in (run / "report/validation").iterdir()}

    def validate(*validation: str) -> None:
        main([
            "validate", "--config", str(run / "config.yaml"),
            "--ckpt_path", str(run / "checkpoints/last.ckpt"), *validation, *QUIET,
        ])  # fmt: skip

    both = f"{{dev: {SAMPLE / 'validation.csv'}, train: {SAMPLE / 'train.csv'}}}"
    validate("--data.validation_file", both)
    report = run / "report/validate-last"
    assert folders(report) == {"validation_dev", "validation_train"}
    validate()  # the run's own validation file, as config.yaml names it
    entry = json.loads((run / "metrics.json").read_text())["evaluations"]["validate-last"]
    assert set(entry) == {"weights", "validation"}
    assert folders(report) == {"validation"}
    assert {p.name: p.read_bytes() for p in (run / "report/validation").iterdir()} == fits_report
