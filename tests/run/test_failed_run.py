"""A failed run: accuracy no better than always answering the majority class."""

import torch

from seqcls.data.labels import LabelSpace
from seqcls.run.report.failed_run import against_majority

SPACE = LabelSpace("single_label_classification", ("entailment", "not_entailment"))
# 6 rows: 4 of not_entailment (the majority, 4/6), 2 of entailment.
TARGETS = torch.tensor([1, 1, 1, 1, 0, 0])


def logits_for(predicted: list[int]) -> torch.Tensor:
    return torch.nn.functional.one_hot(torch.tensor(predicted), 2).float()


def test_one_label_for_every_row_is_a_failed_run() -> None:
    measured = against_majority(SPACE, logits_for([1] * 6), TARGETS)
    assert measured.failed
    assert measured.metrics() == {"majority_class_accuracy": 4 / 6, "largest_predicted_share": 1.0}
    assert measured.warning() == (
        "A failed run: the exported model's accuracy on the validation rows, 0.6667, is no "
        "better than always answering 'not_entailment' (0.6667); 100% of the rows get one "
        "label. Try another --seed_everything or a lower --model.learning_rate (docs/tuning.md)"
    )


def test_below_the_majority_class_fails_too_and_above_it_does_not() -> None:
    # Half right: 3 of 6, below the majority's 4 of 6, though both labels are predicted.
    assert against_majority(SPACE, logits_for([1, 1, 0, 0, 1, 1]), TARGETS).failed
    # 5 of 6 right.
    better = against_majority(SPACE, logits_for([1, 1, 1, 1, 0, 1]), TARGETS)
    assert not better.failed
    assert better.largest_predicted_share == 5 / 6
