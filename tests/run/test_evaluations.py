"""Where validate and test file their results in a run directory
(seqcls.run.outputs.evaluations)."""

from pathlib import Path

import pytest

from seqcls.run.outputs.evaluations import Evaluation, evaluation_in

FIT = {"validation": {"accuracy": 0.9}, "best": {"epoch": 1, "step": 8}, "fit": {}}


def test_a_run_directory_without_a_fit_keeps_the_commands_results_as_its_own() -> None:
    assert evaluation_in({}, "runs/eval", "validate", "runs/a/checkpoints/last.ckpt") is None
    assert evaluation_in({"validation": {}}, "runs/eval", "test", None) is None


@pytest.mark.parametrize(
    ("run_dir", "weights", "expected"),
    [
        ("RUN", "RUN/checkpoints/last.ckpt", Evaluation("validate-last", "checkpoints/last.ckpt")),
        (  # a remote run: the checkpoint as the user named it
            "gs://bucket/run",
            "gs://bucket/run/checkpoints/best-epoch1-step6.ckpt",
            Evaluation("validate-best-epoch1-step6", "checkpoints/best-epoch1-step6.ckpt"),
        ),
        ("RUN", "RUN/model", Evaluation("validate-model", "model")),  # no checkpoint
        (
            "RUN",
            "other/checkpoints/last.ckpt",
            Evaluation("validate-last", "other/checkpoints/last.ckpt"),
        ),
        (
            "gs://bucket/run",
            "gs://bucket/run2/last.ckpt",
            Evaluation("validate-last", "gs://bucket/run2/last.ckpt"),
        ),
    ],
)
def test_in_a_fits_run_directory_each_weights_get_an_entry_of_their_own(
    run_dir: str,
    weights: str,
    expected: Evaluation,
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.chdir(tmp_path)
    assert evaluation_in(FIT, run_dir, "validate", weights) == expected
    if weights.startswith(f"{run_dir}/") and not run_dir.startswith("gs://"):
        absolute = evaluation_in(FIT, run_dir, "validate", str(tmp_path / weights))
        assert absolute == expected  # the same file named by its absolute path


def test_a_later_evaluation_of_the_same_weights_replaces_the_earlier_and_keeps_the_others() -> None:
    metrics = {
        **FIT,
        "evaluations": {"validate-last": {"weights": "x"}, "test-last": {"weights": "y"}},
    }
    recorded = Evaluation("validate-last", "checkpoints/last.ckpt").recorded(
        metrics, {"validation": {"accuracy": 0.5}}
    )
    assert recorded == {
        "evaluations": {
            "validate-last": {"weights": "checkpoints/last.ckpt", "validation": {"accuracy": 0.5}},
            "test-last": {"weights": "y"},
        }
    }
