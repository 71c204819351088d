"""Tokenized splits cached on disk, keyed by everything that changes them: the source's
version, the tokenizer's vocabulary and rules, and the encoding's spec."""

import hashlib
import json
import logging
import os
import shutil
import weakref
from collections.abc import Callable
from dataclasses import asdict
from pathlib import Path
from typing import Any

import datasets
from transformers import PreTrainedTokenizerBase

from seqcls.data.sources import Source

log = logging.getLogger(__name__)

# Bump when the layout of an encoded split changes, so stale caches are ignored.
CACHE_FORMAT = 2

# Hashing a 30,000-word vocabulary takes about 0.1 s, and a run asks once per split and stage.
_FINGERPRINTS: "weakref.WeakKeyDictionary[PreTrainedTokenizerBase, tuple[int, str]]" = (
    weakref.WeakKeyDictionary()
)


def tokenizer_fingerprint(tokenizer: PreTrainedTokenizerBase) -> str:
    """Hash of the tokenizer's vocabulary and rules, not of where it lives on disk.

    Calling a fast tokenizer stores its truncation and padding settings in the backend,
    so those are left out: otherwise the same tokenizer would hash differently before and
    after its first use, and a second run would miss the cache. Computed once per tokenizer
    object, and again if tokens are added to it.
    """
    known = _FINGERPRINTS.get(tokenizer)
    if known is not None and known[0] == len(tokenizer):
        return known[1]
    backend = json.loads(tokenizer.backend_tokenizer.to_str())
    backend.pop("truncation", None)
    backend.pop("padding", None)
    state = [type(tokenizer).__name__, list(tokenizer.model_input_names), backend]
    fingerprint = hashlib.sha256(json.dumps(state, sort_keys=True).encode()).hexdigest()
    _FINGERPRINTS[tokenizer] = (len(tokenizer), fingerprint)
    return fingerprint


def cache_key(version: str, tokenizer: PreTrainedTokenizerBase, spec: Any) -> str:
    """The entry of a source's rows at ``version`` (``Source.fingerprint``), tokenized by
    ``tokenizer`` as ``spec`` (a dataclass) says."""
    state = [CACHE_FORMAT, version, tokenizer_fingerprint(tokenizer), asdict(spec)]
    return hashlib.sha256(json.dumps(state, sort_keys=True).encode()).hexdigest()[:20]


# The cache entries this process has named in its log already: each is named once.
_NAMED: set[Path] = set()


def load_cached(
    source: Source,
    *,
    version: str,
    tokenizer: PreTrainedTokenizerBase,
    spec: Any,
    cache_dir: Path,
    build: Callable[[str], datasets.Dataset],
) -> datasets.Dataset:
    """``build(key)``'s result for this source at ``version``, tokenizer and spec (a
    dataclass), cached on disk under ``key``.

    Writes go to a temporary folder that is renamed into place, so a crash or a second
    process never sees half a cache entry.
    """
    key = cache_key(version, tokenizer, spec)
    target = cache_dir / key
    if (target / "dataset_info.json").is_file():
        if target not in _NAMED:  # a fit reads each entry in prepare_data and again in setup
            log.info("%s: using cached tokens in %s", source.flag, target)
            _NAMED.add(target)
        return datasets.load_from_disk(str(target))
    log.info("%s: tokenizing %s (cached in %s)", source.flag, source.label, target)
    _NAMED.add(target)
    encoded = build(key)
    staging = target.with_name(f"{target.name}.tmp-{os.getpid()}")
    encoded.save_to_disk(str(staging))
    try:
        staging.rename(target)
    except OSError:  # another process finished the same entry first; theirs is identical
        shutil.rmtree(staging, ignore_errors=True)
    return datasets.load_from_disk(str(target))
