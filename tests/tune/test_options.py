"""The ``--tune.*`` options: told apart from the fit flags, their mistakes in one line, and the
help that lists only what ``seqcls tune`` takes."""

import pytest

from seqcls.errors import ConfigurationError
from seqcls.tune.options import TuneOptions, help_text, parse


def test_tune_options_are_split_from_the_fit_flags() -> None:
    argv = ["--config", "c.yaml", "--tune.n_trials", "3", "--tune.prune=false", "--seed_everything"]
    options, fit_args = parse([*argv, "1"])
    assert options == TuneOptions(n_trials=3, prune=False)
    assert fit_args == ["--config", "c.yaml", "--seed_everything", "1"]


@pytest.mark.parametrize(
    ("argv", "message"),
    [
        (["--tune.n_trials", "two"], "--tune.n_trials two: expected int"),
        (["--tune.prune", "maybe"], "--tune.prune maybe: expected bool"),
        (["--tune.timeout=soon"], "--tune.timeout soon: expected float or null"),
        (["--tune.prune_after", "1"], "--tune.prune_after 1: give a value in [0, 1), e.g. 0.25"),
        (
            ["--tune", "tune.yaml"],
            "--tune: give each tune option as --tune.NAME VALUE (seqcls tune --help lists them)",
        ),
        (
            ["--tune.n_trails", "3"],
            "--tune.n_trails: unknown option; did you mean --tune.n_trials? "
            "(seqcls tune --help lists every option)",
        ),
    ],
)
def test_a_bad_value_names_the_option_the_value_and_what_it_takes(
    argv: list[str], message: str
) -> None:
    with pytest.raises(ConfigurationError) as error:
        parse(argv)
    assert str(error.value) == message


def test_the_help_lists_no_option_seqcls_tune_refuses() -> None:
    shown = help_text()
    assert "--tune.n_trials" in shown
    # jsonargparse's --tune CONFIG for the group: seqcls tune takes --tune.* flags only.
    assert "--tune CONFIG" not in shown
    assert "[--tune CONFIG]" not in " ".join(shown.split())


def test_the_prune_help_holds_for_metrics_either_way() -> None:
    shown = " ".join(help_text().split())
    assert "worse than the median of the complete trials' best by the same number of rows" in shown
    assert "below the median" not in shown  # a loss is worse above it
