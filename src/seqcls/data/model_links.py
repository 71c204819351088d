"""What the classification data module tells the model, linked to it when the CLI builds
both: the label space (from the flags, the training labels or a fine-tuned model's config),
the metrics and the one that picks the best checkpoint, the validation sets' names and the
pair encoding; and what of them ``config.yaml`` records.
"""

from functools import cached_property
from typing import Any, Literal

from seqcls.data.batches import ClassificationBatches
from seqcls.data.inspection import report_regression
from seqcls.data.labels import LabelSpace, ProblemType, given_label_space
from seqcls.data.metric_names import direction, metric_names
from seqcls.data.model_files import model_label_space
from seqcls.data.pair_batches import PairEncoding, unset_pair_encoding
from seqcls.data.sources import read_label_space
from seqcls.data.windows import WindowPooling


class ClassificationLinks(ClassificationBatches):
    """The links of ``TextClassificationDataModule`` to the model; it sets these."""

    text_pair_column: str | None
    label_column: str
    label_separator: str | None
    # Linked to the model, which pools each document's windows when this is set.
    window_pooling: WindowPooling | None
    _label_names: list[str] | None
    _problem_type: ProblemType | None
    _metrics: list[str] | None
    # Given or the model's; unset and unsaved, chosen from the task (``pair_encoding``).
    _pair_encoding: PairEncoding | None

    @cached_property
    def label_space(self) -> LabelSpace:
        if self._problem_type == "regression" or (self._label_names and self._problem_type):
            return given_label_space(self._problem_type, self._label_names, self.label_column)
        if not self.sources.has_train():  # validate, test or predict with a fine-tuned model
            return model_label_space(self.tokenizer_name_or_path)
        (source,) = self.sources.of("train")
        space = read_label_space(
            source,
            self.label_column,
            separator=self.label_separator,
            names=self._label_names,
            problem_type=self._problem_type,
        )
        if self._problem_type is None:
            report_regression(source, self.label_column, space)
        return space

    @cached_property
    def pair_encoding(self) -> PairEncoding:
        """Linked to the model, which encodes the two texts of a pair apart when separate."""
        if self._pair_encoding is None and self.text_pair_column is not None:
            return unset_pair_encoding(
                self.tokenizer_name_or_path,
                regression=self.problem_type == "regression",
                window_stride=self.window_stride,
                packing=self.packing,
            )
        return self._pair_encoding or "joint"

    @property
    def label_names(self) -> list[str]:
        return list(self.label_space.names)

    @property
    def problem_type(self) -> ProblemType:
        return self.label_space.problem_type

    @property
    def metrics(self) -> list[str]:
        return metric_names(self._metrics, self.problem_type)

    @property
    def validation_names(self) -> list[str]:
        """One name per validation set: its metrics are logged as ``NAME/metric``."""
        return ["val" if not key else f"val_{key}" for key, _ in self.sources.validation_sets()]

    @property
    def monitor(self) -> tuple[str, Literal["min", "max"]]:
        """The metric that picks the best checkpoint, and whether lower or higher is better."""
        first = self.metrics[0]
        return f"{self.validation_names[0]}/{first}", direction(first)

    def derived_config(self) -> dict[str, Any]:
        derived: dict[str, Any] = {
            "label_names": self.label_names,
            "problem_type": self.problem_type,
            "metrics": self.metrics,
        }
        if self.text_pair_column is not None:
            # Unset, it came from the model; a later command may name another (the base model
            # beside --ckpt_path), which would read the pairs jointly.
            derived["pair_encoding"] = self.pair_encoding
        return derived
