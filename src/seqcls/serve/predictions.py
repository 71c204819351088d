"""Texts to answers: tokenized as the fit read them, scored, calibrated, named.

- Inputs longer than the fit's ``max_length`` are cut, as in training; a model fitted with
  ``--data.window_stride`` scores each long text by its windows instead, pooled as in its
  fit (data/windows.py), so a served answer is the one ``seqcls predict`` writes.
- single-label: ``{"label", "score", "scores"}``, the probabilities after the saved
  temperature; multi-label: ``{"labels", "scores"}``, the labels whose probability reaches
  their saved threshold; regression: ``{"value"}``.
"""

from collections.abc import Sequence
from typing import Any

import numpy as np

from seqcls.serve.backends import Backend
from seqcls.serve.model_files import ModelFiles

Row = tuple[str, str | None]  # a text and, for a pair, its second text


class Predictor:
    """Scores rows with ``backend`` and answers each in the model's terms.

    Args:
        files: The model folder's labels, problem type, calibration and reading.
        backend: PyTorch or ONNX Runtime.
        max_rows: The most token rows one forward pass takes; more (a long document's
            windows) are scored in several passes.
    """

    def __init__(self, files: ModelFiles, backend: Backend, max_rows: int = 64) -> None:
        from transformers import AutoTokenizer

        self.files = files
        self.backend = backend
        self.max_rows = max_rows
        self.tokenizer = AutoTokenizer.from_pretrained(files.folder)
        reading = files.reading
        self.overlap: int | None = None
        if reading.window_stride is not None:
            from seqcls.data.windows import overlap

            self.overlap = overlap(reading.window_stride, reading.max_length, self.tokenizer)

    @property
    def reads_windows(self) -> bool:
        return self.overlap is not None

    def predict(self, rows: Sequence[Row]) -> list[dict[str, Any]]:
        """One answer per row, in order."""
        logits = np.zeros((len(rows), len(self.files.labels)), dtype=np.float32)
        pairs = [index for index, (_, pair) in enumerate(rows) if pair is not None]
        singles = [index for index, (_, pair) in enumerate(rows) if pair is None]
        for chosen in (singles, pairs):
            if chosen:
                logits[chosen] = self.logits([rows[index] for index in chosen])
        return [self.answer(row) for row in logits]

    def logits(self, rows: Sequence[Row]) -> np.ndarray:
        """The rows' logits (all single texts, or all pairs), pooled over windows."""
        texts = [text for text, _ in rows]
        pairs = [pair for _, pair in rows] if rows[0][1] is not None else None
        max_length = self.files.reading.max_length
        if self.overlap is not None and pairs is None:
            encoded = self.tokenizer(
                texts,
                truncation=True,
                max_length=max_length,
                stride=self.overlap,
                return_overflowing_tokens=True,
                padding=True,
                return_tensors="np",
            )
            owner = np.asarray(encoded.pop("overflow_to_sample_mapping"))
        else:
            # longest_first trims the longer text of a pair first, as the fit's encoding does.
            encoded = self.tokenizer(
                texts,
                pairs,
                truncation="longest_first",
                max_length=max_length,
                padding=True,
                return_tensors="np",
            )
            owner = np.arange(len(texts))
        features = {name: np.asarray(values, dtype=np.int64) for name, values in encoded.items()}
        window_logits = np.concatenate(
            [
                self.backend.logits(
                    {name: v[start : start + self.max_rows] for name, v in features.items()}
                )
                for start in range(0, len(owner), self.max_rows)
            ]
        )
        return pool(window_logits, owner, len(rows), self.files.reading.window_pooling or "mean")

    def answer(self, logits: np.ndarray) -> dict[str, Any]:
        files = self.files
        if files.problem_type == "regression":
            return {"value": float(logits[0])}
        if files.problem_type == "multi_label_classification":
            probabilities = 1.0 / (1.0 + np.exp(-logits.astype(np.float64)))
            chosen = zip(files.labels, probabilities, files.thresholds, strict=True)
            return {
                "labels": [name for name, p, threshold in chosen if p >= threshold],
                "scores": dict(zip(files.labels, map(float, probabilities), strict=True)),
            }
        scaled = logits.astype(np.float64) / files.temperature
        probabilities = np.exp(scaled - scaled.max())
        probabilities /= probabilities.sum()
        best = int(probabilities.argmax())
        return {
            "label": files.labels[best],
            "score": float(probabilities[best]),
            "scores": dict(zip(files.labels, map(float, probabilities), strict=True)),
        }


def pool(logits: np.ndarray, owner: np.ndarray, documents: int, pooling: str) -> np.ndarray:
    """Each document's window logits as one row (their mean or maximum), in document order;
    one window per document leaves the logits as they are."""
    if len(owner) == documents:
        return logits
    pooled = np.full((documents, logits.shape[1]), -np.inf if pooling == "max" else 0.0)
    if pooling == "max":
        np.maximum.at(pooled, owner, logits)
        return pooled.astype(np.float32)
    np.add.at(pooled, owner, logits)
    return (pooled / np.bincount(owner, minlength=documents)[:, None]).astype(np.float32)
