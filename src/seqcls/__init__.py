"""seqcls: fine-tune Hugging Face sequence classifiers with PyTorch Lightning."""

from seqcls.data import TextClassificationDataModule
from seqcls.errors import ConfigurationError
from seqcls.model import SequenceClassifier

__all__ = ["ConfigurationError", "SequenceClassifier", "TextClassificationDataModule"]
__version__ = "0.1.0"
