"""The model card's validation section (seqcls.run.outputs.model_card), rendered without a run."""

from seqcls.run.outputs.model_card import ModelCard

METRICS = {
    "fit": {"validated": True, "exported": "best checkpoint"},
    "best": {"step": 12},
    "validation": {"accuracy": 0.75},
}


def card(**overrides: object) -> str:
    arguments: dict[str, object] = {
        "command": "seqcls fit",
        "pipeline_tag": "text-classification",
        "base_model": "models/base",
        "metrics": METRICS,
        "recipe": {},
        "hardware": "1 node(s) x 1 CPU",
        "minutes": 1.0,
        "config_yaml": "",
        **overrides,
    }
    return ModelCard(**arguments).render()  # type: ignore[arg-type]


def test_validation_rows_that_also_train_are_stated_under_the_metrics() -> None:
    text = card(seen_rows={"--data.validation_file": (16, 1043)})
    validation = text.split("## Validation metrics\n", 1)[1].split("\n## ", 1)[0]
    assert "| accuracy | 0.7500 |" in validation
    assert validation.rstrip().endswith(
        "16 of the 1,043 validation rows (`--data.validation_file`) have the same tokens as a "
        "training row; these metrics count them as unseen."
    )


def test_without_such_rows_the_card_says_nothing_of_them() -> None:
    assert "training row" not in card()


def test_a_short_fit_is_timed_in_seconds_a_long_one_in_minutes() -> None:
    assert "the fit took 3 seconds." in card(minutes=0.05)
    assert "the fit took 2.5 minutes." in card(minutes=2.5)
