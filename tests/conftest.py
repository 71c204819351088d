"""Shared pytest configuration and fixtures for the seqcls test suite."""

from __future__ import annotations

import os
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest
import torch

# Tests never reach the network; this has to happen before transformers / huggingface_hub load.
os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")

# Make the helper modules next to this file (e.g. ``tiny_models``) importable from any test,
# whatever pytest import mode is in use.
_TESTS_DIR = str(Path(__file__).resolve().parent)
if _TESTS_DIR not in sys.path:
    sys.path.insert(0, _TESTS_DIR)

from tiny_models import build_tiny_bert, build_tiny_roberta  # noqa: E402

# --------------------------------------------------------------------------------------------
# Tiny offline checkpoints
# --------------------------------------------------------------------------------------------


@pytest.fixture(scope="session")
def tiny_bert(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """Directory holding a tiny random ``BertModel`` checkpoint and its fast tokenizer."""
    return build_tiny_bert(tmp_path_factory.mktemp("tiny-bert"), max_length=128)


@pytest.fixture(scope="session")
def tiny_roberta(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """Directory holding a tiny random ``RobertaModel`` checkpoint and its fast tokenizer."""
    return build_tiny_roberta(tmp_path_factory.mktemp("tiny-roberta"), max_length=128)


@pytest.fixture(scope="module")
def one_thread() -> Iterator[None]:
    """One torch thread for a whole module (``pytestmark = pytest.mark.usefixtures(...)``):
    the same arithmetic in every run it compares, to the bit."""
    threads = torch.get_num_threads()
    torch.set_num_threads(1)
    yield
    torch.set_num_threads(threads)


@pytest.fixture(autouse=True)
def _torch_matmul_precision() -> Iterator[None]:
    """A run puts torch's matmul precision back however it ends; a test that sets it by hand
    (``MatmulPrecision.apply``) must not leak it into the next test either."""
    before = torch.get_float32_matmul_precision()
    yield
    torch.set_float32_matmul_precision(before)
