"""seqcls: fine-tune Hugging Face sequence classifiers with PyTorch Lightning.

The package, from the bottom up (docs/architecture.md draws it):

- ``errors``, ``option_ranges``, ``hardware``: the one exception type, the values each numeric
  option takes, and what the machine can train on;
- ``cloud/``: local and ``gs://`` storage, the Vertex AI environment;
- ``sentence_encoder``: how a sentence-transformers checkpoint pools, read off its files;
- ``context_values``: a context variable set for one block (a packed batch's layout);
- ``data/``: files and hub splits to token batches, labels decided once;
- ``speedups/``: the same training step faster on its device, each speed-up behind one switch;
- ``model/``: pretrained loading, the classifier module, its metrics and optimiser;
- ``mlm/``: continued masked-LM pretraining on the same data and run machinery;
- ``run/``: the run directory (checkpoints, resume, outputs, export, logs) and its CLI base;
- ``tune/``: hyper-parameter search, ``seqcls tune`` (Optuna) and Vertex AI's study spec;
- ``cli``: the ``seqcls`` command on top.

The names below are imported on first use, so ``import seqcls`` stays cheap.
"""

import importlib
from typing import Any

_EXPORTS = {
    "ClassificationBatches": "seqcls.data.batches",
    "ClassificationLinks": "seqcls.data.model_links",
    "ClassificationRows": "seqcls.data.rows",
    "ConfigurationError": "seqcls.errors",
    "MaskedLanguageModel": "seqcls.mlm.model",
    "SequenceClassifier": "seqcls.model.classifier",
    "TextClassificationDataModule": "seqcls.data.classification",
    "TextCorpusDataModule": "seqcls.mlm.corpus",
    "TextDataModule": "seqcls.data.base",
    "Throughput": "seqcls.run.fit.throughput",
}
__all__ = sorted(_EXPORTS)
__version__ = "0.1.0"


def __getattr__(name: str) -> Any:
    if name not in _EXPORTS:
        raise AttributeError(f"module 'seqcls' has no attribute {name!r}")
    return getattr(importlib.import_module(_EXPORTS[name]), name)
