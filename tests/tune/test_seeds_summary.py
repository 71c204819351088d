"""seeds.md: the best parameters over seeds, and how many of those runs failed."""

from seqcls.tune.outputs import seeds_summary


def seed(accuracy: float, majority: float = 0.527) -> dict[str, float]:
    return {"val/accuracy": accuracy, "val/majority_class_accuracy": majority}


def test_the_table_gives_mean_and_spread_and_counts_the_failed_seeds() -> None:
    summary = seeds_summary({42: seed(0.65), 43: seed(0.527), 44: seed(0.63)}, "val/accuracy")
    assert "| val/accuracy | 0.6023 ± 0.0660 | 0.6500 | 0.5270 | 0.6300 |" in summary
    assert summary.endswith("\nFailed runs, no better than the majority class: 1 of 3 (seed 43)\n")


def test_no_failed_seed_says_none() -> None:
    summary = seeds_summary({1: seed(0.7), 2: seed(0.6)}, "val/accuracy")
    assert "Failed runs, no better than the majority class: 0 of 2\n" in summary


def test_a_regression_has_no_majority_class_to_fail_against() -> None:
    summary = seeds_summary({1: {"val/pearson": 0.8}, 2: {"val/pearson": 0.9}}, "val/pearson")
    assert "Failed runs" not in summary


def test_the_summary_says_which_seed_the_runs_leave_out() -> None:
    summary = seeds_summary({43: seed(0.6), 44: seed(0.62)}, "val/accuracy", trial_seed=42)
    assert "The best trial ran with seed 42, which these runs leave out" in summary
