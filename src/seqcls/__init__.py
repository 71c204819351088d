"""seqcls: fine-tune Hugging Face sequence classifiers with PyTorch Lightning."""

from seqcls.corpus import TextCorpusDataModule
from seqcls.data import TextClassificationDataModule
from seqcls.errors import ConfigurationError
from seqcls.masked_lm import MaskedLanguageModel
from seqcls.model import SequenceClassifier
from seqcls.throughput import Throughput

__all__ = [
    "ConfigurationError",
    "MaskedLanguageModel",
    "SequenceClassifier",
    "TextClassificationDataModule",
    "TextCorpusDataModule",
    "Throughput",
]
__version__ = "0.1.0"
