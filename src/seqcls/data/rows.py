"""The splits of ``TextClassificationDataModule``: which rows each stage reads and trains on.

``setup`` goes down the data package once per source: the rows are read (``sources.py``,
``tables.py``), their columns checked and their label cells read against the label space
(``labels.py``), then taken from the cache (``token_cache.py``) or, on a miss, each label made
its target and the chosen rows tokenized (``encoding.py``). Then the training rows are chosen
(held out, subsampled: ``selection.py``) and what a fit should know of them is said
(``inspection.py``). What the rows tell the model is in ``model_links.py``.
"""

from typing import Literal

import datasets

from seqcls.data.columns import LABELS
from seqcls.data.encoding import EncodingSpec, encode_table
from seqcls.data.glue import check_glue_labels
from seqcls.data.inspection import (
    report_label_ids,
    report_seen_rows,
    report_truncation,
    show_examples,
)
from seqcls.data.labels import (
    Target,
    encode_labels,
    label_cells,
    label_counts,
    reads_label_ids,
)
from seqcls.data.model_links import ClassificationLinks
from seqcls.data.selection import Subset, check_rows_left, hold_out, subsample
from seqcls.data.sources import Source, Split
from seqcls.data.tables import column_values, require_columns
from seqcls.data.token_cache import load_cached
from seqcls.data.windows import flatten_windows, overlap

_STAGE_SPLITS: dict[str, tuple[Split, ...]] = {
    "fit": ("train", "validation"),
    "validate": ("validation",),
    "test": ("test",),
    "predict": ("predict",),
}


class ClassificationRows(ClassificationLinks):
    """The splits of ``TextClassificationDataModule``, which sets these options."""

    text_column: str
    train_fraction: float | None
    max_train_samples: int | None
    output_format: Literal["csv", "jsonl", "glue"]
    # Validation flag -> (rows that are training rows too, rows), after setup("fit").
    seen_rows: dict[str, tuple[int, int]]

    # Lightning hooks.

    def prepare_data(self) -> None:
        # One process per node tokenizes and fills the cache; setup() on every rank reads it.
        stage = self._stage()
        splits = list(_STAGE_SPLITS[stage])
        if stage == "validate" and not self.sources.has_validation():
            splits.append("train")  # the held-out rows come from it
        for split in splits:
            for source in self.sources.of(split):
                self._encode(source, labelled=split != "predict", subset=self._subset(split))

    def setup(self, stage: str) -> None:
        if stage == "predict" and self.output_format == "glue":
            check_glue_labels(self.sources.dataset_config, self.label_names, self.problem_type)
        for split in _STAGE_SPLITS[stage]:
            self.splits[split] = [
                self._encode(source, labelled=split != "predict", subset=self._subset(split))
                for source in self.sources.of(split)
            ]
        if stage == "fit" and self.holds_out_nothing:
            self.splits["validation"] = []  # every row trains; the fit validates nothing
        elif stage in ("fit", "validate") and not self.sources.has_validation():
            (train,) = [self._encode(source, labelled=True) for source in self.sources.of("train")]
            classes = self.problem_type == "single_label_classification"
            labels = column_values(train, LABELS) if classes else None  # to stratify by
            rest, held = hold_out(train, self.validation_fraction, seed=self.seed, labels=labels)
            self.splits["validation"] = [held]
            if stage == "fit":
                self.splits["train"] = [rest]
        if stage == "fit":
            (train,) = self.splits["train"]
            if self._subset("train") is None:  # else already chosen before tokenizing
                train = subsample(
                    train,
                    fraction=self.train_fraction,
                    max_samples=self.max_train_samples,
                    seed=self.seed,
                )
            (source,) = self.sources.of("train")
            check_rows_left(train, source, held_out=not self.sources.has_validation())
            if self.window_stride is not None:
                train = flatten_windows(train)
            self.splits["train"] = [train]
            show_examples(train, self.tokenizer, self.label_space)
            if self.window_stride is None:
                validation = (self.sources.of("validation"), self.splits["validation"])
                self.seen_rows = report_seen_rows(train, *validation) or {}
        if stage in ("fit", "validate") and self.window_stride is None:
            report_truncation(
                [(self.sources.of(name), self.splits[name]) for name in _STAGE_SPLITS[stage]],
                max_length=self.max_length,
                model_limit=self.tokenizer.model_max_length,
                pairs=self.text_pair_column is not None,
                separate=self.pair_encoding == "separate",
            )

    def train_label_counts(self) -> list[int]:
        """Single-label: how many training rows (windows, with windows) carry each label id.

        Known after ``setup("fit")``: the training rows as they train, held-out rows and
        subsets removed."""
        (train,) = self.splits["train"]
        return label_counts(train[LABELS], len(self.label_names))

    def regression_label_range(self) -> tuple[float, float]:
        """Regression: the lowest and the highest training label.

        Known after ``setup("fit")``, as ``train_label_counts``."""
        (train,) = self.splits["train"]
        labels = train[LABELS]
        return float(min(labels)), float(max(labels))

    def _subset(self, split: Split) -> Subset | None:
        """The training rows to tokenize, when fewer than all: the rest are never tokenized.

        Without a validation set the held-out rows come first, out of all the training rows,
        so the subset is taken after tokenizing (in ``setup``).
        """
        if split != "train" or not self.sources.has_validation():
            return None
        if self.train_fraction is None and self.max_train_samples is None:
            return None
        return Subset(self.train_fraction, self.max_train_samples, self.seed)

    def _encode(
        self, source: Source, *, labelled: bool, subset: Subset | None = None
    ) -> datasets.Dataset:
        """One source's encoded rows: read once; its columns and label cells checked; then from
        the cache, or with each label made its target and the chosen rows tokenized."""
        spec = EncodingSpec(
            text_column=self.text_column,
            text_pair_column=self.text_pair_column,
            label_column=self.label_column if labelled else None,
            label_separator=self.label_separator,
            labels=self.label_space if labelled else None,
            max_length=self.max_length,
            subset=subset,
            window_stride=self.window_stride,
            pair_encoding=self.pair_encoding,
        )
        if self.window_stride is not None:
            overlap(self.window_stride, self.max_length, self.tokenizer)  # fails before reading
        table, version = source.read_version()
        columns = {
            "text_column": spec.text_column,
            "text_pair_column": spec.text_pair_column,
            "label_column": spec.label_column,
        }
        require_columns(table, columns, path=source.label)
        cells: list[object] | None = None  # the label column's, split where multi-label
        if spec.label_column is not None:
            values = column_values(table, spec.label_column)
            cells = label_cells(
                values, separator=spec.label_separator, path=source.label, column=spec.label_column
            )
        # Said on every run, cached tokens or not: they hold ids, not labels.
        ids = cells is not None and reads_label_ids(cells, self.label_space)

        def tokenized(key: str) -> datasets.Dataset:
            # Every row's label is checked (cheap); only the chosen rows are tokenized.
            targets: list[Target] | None = None
            if cells is not None:
                where = f"{source.label}, column {self.label_column!r}"
                targets = encode_labels(cells, self.label_space, where=where)
            return encode_table(
                source,
                table=table,
                targets=targets,
                tokenizer=self.tokenizer,
                spec=spec,
                key=key,
                num_proc=self.num_proc,
            )

        encoded = load_cached(
            source,
            version=version,
            tokenizer=self.tokenizer,
            spec=spec,
            cache_dir=self.cache_dir,
            build=tokenized,
        )
        if ids:
            report_label_ids(source, table, self.label_column, self.label_space)
        return encoded
