"""TextClassificationDataModule: labelled text in, padded token batches out.

Its typed ``__init__`` is what LightningCLI reads (``--data.*``); what the module does with
its splits lives in ``rows.py`` (reading, labels, tokens, chosen rows) and ``batches.py``
(loaders).
"""

from typing import Literal

import datasets

from seqcls.data.glue import GLUE_DATASETS, glue_task
from seqcls.data.labels import ProblemType
from seqcls.data.loaders import Padding, check_buckets
from seqcls.data.model_files import model_pair_encoding
from seqcls.data.pair_batches import PairEncoding, check_pair_encoding
from seqcls.data.rows import ClassificationRows
from seqcls.data.sources import Split, SplitSources
from seqcls.data.windows import WindowPooling, check_windows


class TextClassificationDataModule(ClassificationRows):
    def __init__(
        self,
        train_file: str | None = None,
        validation_file: str | dict[str, str] | None = None,
        test_file: str | None = None,
        predict_file: str | None = None,
        dataset_name: str | None = None,
        dataset_config: str | None = None,
        train_split: str = "train",
        validation_split: str | list[str] | None = "validation",
        test_split: str = "test",
        predict_split: str = "test",
        text_column: str = "text",
        text_pair_column: str | None = None,
        pair_encoding: PairEncoding | None = None,
        label_column: str = "label",
        label_separator: str | None = None,
        label_names: list[str] | None = None,
        problem_type: ProblemType | None = None,
        metrics: list[str] | None = None,
        validation_fraction: float = 0.1,
        tokenizer_name_or_path: str | None = None,
        max_length: int = 128,
        window_stride: int | None = None,
        window_pooling: WindowPooling | None = None,
        padding: Padding | None = None,
        drop_last: bool | None = None,
        group_by_length: bool = False,
        pad_to_multiple_of: int | None = None,
        length_buckets: list[int] | None = None,
        sub_batches: int | None = None,
        packing: bool | Literal["auto"] = "auto",
        batch_size: int = 32,
        eval_batch_size: int | None = None,
        train_fraction: float | None = None,
        max_train_samples: int | None = None,
        num_workers: int = 0,
        num_proc: int | None = None,
        output_format: Literal["csv", "jsonl", "glue"] = "csv",
        seed: int | None = None,
        cache_dir: str | None = None,
    ) -> None:
        """Labelled text from local or remote files (CSV, TSV, JSON Lines, Parquet) or the hub.

        Args:
            train_file: Training examples; also the source of the label names unless
                ``label_names`` is given. Any ``*_file`` replaces the hub dataset.
            validation_file: Scored after each epoch to choose the best checkpoint. A mapping
                of names to files scores several sets (``{matched: a.tsv, mismatched: b.tsv}``).
                Without one, ``validation_fraction`` of the training rows are held out.
            test_file: Scored by ``seqcls test``.
            predict_file: Labelled by ``seqcls predict``; needs only the text column(s).
            dataset_name: A hub dataset (``nyu-mll/glue``), used when no file is given.
            dataset_config: The hub dataset's configuration (``rte``).
            train_split: The hub split to train on.
            validation_split: The hub split(s) to validate on; several get separate metrics.
                None holds out ``validation_fraction`` of the training rows.
            test_split: The hub split ``seqcls test`` scores.
            predict_split: The hub split ``seqcls predict`` labels.
            text_column: Column holding the text.
            text_pair_column: Column holding the second text of a pair; unset for single texts.
            pair_encoding: How a text pair is encoded. ``joint``: both texts in one input
                (``[CLS] a [SEP] b [SEP]``), as a cross-encoder reads them. ``separate``:
                each text on its own, as sentence encoders were trained; the model compares
                the two encodings (docs/data.md). Unset: what the model named by
                ``--model.model_name_or_path`` was fine-tuned with (its config.json's
                ``seqcls_pair_encoding``); else ``separate`` for similarity scores
                (regression) from a sentence encoder that averages its tokens (its
                sentence-transformers files say so), ``joint`` otherwise.
            label_column: Column holding the label: a name, an integer, a float (regression)
                or a list of labels (multi-label).
            label_separator: Multi-label rows in text files: split each label cell on this
                (``|`` reads ``billing|shipping`` as two labels).
            label_names: Every label, in id order. By default the hub's class names or the
                sorted labels of the training data. config.yaml records them.
            problem_type: By default from the labels: lists are multi-label, floats a
                regression, anything else single-label classification.
            metrics: Metric names, the first one choosing the best checkpoint. By default
                accuracy and macro_f1; micro_f1 and macro_f1 (multi-label); pearson, spearman
                and mse (regression). Also f1 (of class 1 with two classes), matthews and
                subset_accuracy (multi-label).
            validation_fraction: Share of training rows held out (seeded, stratified by
                class) when there is no validation set; 0 holds out none, and the fit
                trains on every row and validates nothing.
            tokenizer_name_or_path: Tokenizer to use; follows ``--model.model_name_or_path``.
            max_length: Longest input in tokens; longer inputs are truncated (or, with
                ``window_stride``, read as several windows of this length).
            window_stride: Read an input longer than ``max_length`` as overlapping windows of
                ``max_length`` tokens, their starts this many tokens apart (smaller: more
                overlap, more windows). Training sees every window with its document's
                label; validation, test and predict score each document once from all its
                windows (``window_pooling``), so metrics and predictions stay one per input.
                Evaluation batches then hold ``eval_batch_size`` documents. Single texts
                only. Unset: longer inputs are truncated.
            window_pooling: How a document's window logits become its score with
                ``window_stride``: ``mean`` (the default) or ``max``.
            padding: ``longest`` pads each batch to its longest input (rounded up to a
                multiple of 8); ``max_length`` pads every batch to ``max_length``;
                ``buckets`` pads each batch to the shortest of ``length_buckets`` that holds
                it (on XLA: one compiled graph per bucket, far less padding than
                ``max_length``). By default ``max_length`` on XLA (TPU), where each new
                shape compiles, else ``longest``.
            drop_last: Drop the last incomplete training batch. By default only on XLA.
            group_by_length: Train on batches of similar lengths (random within large
                sorted megabatches, batches in a new random order each epoch, seeded by
                ``seed``): far less padding, so faster, but batches less random, which
                cost STS-B 1.4 Pearson and 2.5 to 3.2 Spearman points (docs/benchmarks.md).
                Off: rows shuffled one by one, as run_glue does.
            pad_to_multiple_of: Round ``longest`` padding, and packed rows, up to a multiple
                of this. By default 8 on GPUs and TPUs (tensor-core shapes, fewer compiled
                shapes) and for a CPU's batches packed in one row (shapes that repeat, so
                oneDNN reuses its kernels), else none on CPU, where it only adds padding.
            length_buckets: The lengths ``padding: buckets`` pads to; by default a quarter,
                a half and all of ``max_length`` (32, 64, 128). Inputs are still truncated
                to ``max_length``.
            sub_batches: Run each batch as up to this many forward passes over its rows
                sorted by length, each padded to its own longest row: the same rows and the
                same mean loss as one pass, with far less padding (docs/benchmarks.md). By
                default 4 on CPU with ``padding: longest`` (training batches: without
                ``group_by_length``), else 1. Used where batches are not packed.
            packing: Lay several rows of a batch end to end in one row of the model's input,
                each attending only to itself, positions restarting per row: the same rows,
                logits and mean loss, far less padding (docs/packing.md). ``auto``: on CPU
                with ``padding: longest``, each batch (training, validation, prediction) is
                one model row, padded only up to ``pad_to_multiple_of``, where the model's
                attention can follow the segments (BERT, RoBERTa, XLM-R, ELECTRA, ...), else
                packed or split into ``sub_batches``, whichever a measured cost model says
                is faster; on XLA (TPU) with ``padding: max_length``, batches are packed
                densely into fixed shapes (training: about ``batch_size`` random rows each),
                so nothing recompiles (docs/packing.md); on a CUDA GPU, evaluation batches
                (validation, test, prediction) where attention follows the segments (the
                variable-length kernel, half precision), training batches padded; off
                elsewhere. ``true``: every batch packed. ``false``: never. A model that
                cannot take packed rows runs them unpacked, with the same results (on XLA:
                padded to ``max_length``).
            batch_size: Examples per training batch on each device.
            eval_batch_size: Examples per evaluation or prediction batch; default ``batch_size``.
            train_fraction: Train on this seeded random share of the training rows.
            max_train_samples: Train on at most the first N training rows (after
                ``train_fraction``). With a validation set, only the chosen rows are
                tokenized.
            num_workers: Background processes that collate batches.
            num_proc: Processes that tokenize; by default several from 50,000 rows on.
            output_format: ``seqcls predict`` writes ``predictions.csv``, ``predictions.jsonl``
                or, with ``glue``, a GLUE submission file such as ``RTE.tsv``.
            seed: Seed for the held-out split, ``train_fraction`` and the length-grouped
                order. Unset: the run's ``--seed_everything``, which also seeds the shuffled
                order, dropout and the new head, so one seed governs the whole run.
            cache_dir: Where tokenized splits, and copies of remote data files, are cached;
                default ``$SEQCLS_CACHE`` or ``~/.cache/seqcls``.
        """
        sources = SplitSources.from_arguments(
            dataset_name,
            dataset_config,
            train_file=train_file,
            validation_file=validation_file,
            test_file=test_file,
            predict_file=predict_file,
            train_split=train_split,
            validation_split=validation_split,
            test_split=test_split,
            predict_split=predict_split,
            cache_dir=cache_dir,
        )
        super().__init__(
            sources,
            tokenizer_name_or_path=tokenizer_name_or_path,
            max_length=max_length,
            batch_size=batch_size,
            eval_batch_size=eval_batch_size,
            num_workers=num_workers,
            num_proc=num_proc,
            seed=seed,
            cache_dir=cache_dir,
        )
        self.text_column, self.text_pair_column = text_column, text_pair_column
        self.label_column, self.label_separator = label_column, label_separator
        self._label_names, self._problem_type, self._metrics = label_names, problem_type, metrics
        self.validation_fraction = validation_fraction
        self.padding, self.drop_last = padding, drop_last
        self.group_by_length, self.pad_to_multiple_of = group_by_length, pad_to_multiple_of
        # Given or the model's; unset and unsaved, chosen from the task (``pair_encoding``).
        # Read for single texts too: a model that reads pairs separately cannot read one text.
        self._pair_encoding = pair_encoding or model_pair_encoding(tokenizer_name_or_path)
        check_pair_encoding(
            self._pair_encoding,
            given=pair_encoding is not None,
            text_pair_column=text_pair_column,
            window_stride=window_stride,
            packing=packing,
        )
        check_buckets(length_buckets, max_length)
        check_windows(
            window_stride, window_pooling, max_length=max_length, text_pair_column=text_pair_column
        )
        self.window_stride = window_stride
        # Linked to the model, which pools each document's windows when this is set.
        self.window_pooling = (window_pooling or "mean") if window_stride is not None else None
        self.length_buckets, self.sub_batches = length_buckets, sub_batches
        self.packing = packing
        self.train_fraction, self.max_train_samples = train_fraction, max_train_samples
        self.output_format = output_format
        self.splits: dict[Split, list[datasets.Dataset]] = {}
        # Validation flag -> (rows that are training rows too, rows), after setup("fit").
        self.seen_rows: dict[str, tuple[int, int]] = {}
        if output_format == "glue" or dataset_name in GLUE_DATASETS:
            glue_task(dataset_config)  # an unknown task name fails now, listing the valid ones
