import json
from pathlib import Path
from types import SimpleNamespace

import pytest
from transformers import AutoTokenizer

from seqcls.data import token_cache
from seqcls.data.token_cache import tokenizer_fingerprint


def test_fingerprint_is_computed_once_per_tokenizer(
    tiny_bert: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    parsed = []

    def counting_loads(text: str) -> object:
        parsed.append(text)
        return json.loads(text)

    monkeypatch.setattr(
        token_cache, "json", SimpleNamespace(loads=counting_loads, dumps=json.dumps)
    )
    tokenizer = AutoTokenizer.from_pretrained(tiny_bert)
    first = tokenizer_fingerprint(tokenizer)
    tokenizer(["a first call stores truncation settings"], truncation=True, max_length=8)
    assert [tokenizer_fingerprint(tokenizer) for _ in range(5)] == [first] * 5
    assert len(parsed) == 1
    # Another object loaded from the same files hashes the same, computed afresh.
    assert tokenizer_fingerprint(AutoTokenizer.from_pretrained(tiny_bert)) == first
    assert len(parsed) == 2


def test_fingerprint_changes_when_tokens_are_added(tiny_bert: Path) -> None:
    tokenizer = AutoTokenizer.from_pretrained(tiny_bert)
    before = tokenizer_fingerprint(tokenizer)
    tokenizer.add_tokens(["[newword]"])
    assert tokenizer_fingerprint(tokenizer) != before
