"""benchmarks/run.py random-model: an encoder of the named shape, headless, with the tokenizer."""

import math
from pathlib import Path

import pytest
from benchmark_entry import load_run
from safetensors import safe_open
from transformers import AutoConfig, AutoTokenizer


def test_it_writes_a_headless_encoder_of_the_shape_with_the_tokenizer(
    tiny_bert: Path, tmp_path: Path
) -> None:
    out = tmp_path / "minilm"
    argv = ["random-model", "--shape", "minilm", "--tokenizer", str(tiny_bert), "--out", str(out)]
    result = load_run().main(argv)
    config = AutoConfig.from_pretrained(out)
    shape = (config.hidden_size, config.num_hidden_layers, config.intermediate_size)
    assert shape == (384, 6, 1536)
    tokenizer = AutoTokenizer.from_pretrained(out)
    assert config.vocab_size == len(tokenizer)
    source = AutoTokenizer.from_pretrained(tiny_bert)
    assert tokenizer("a test")["input_ids"] == source("a test")["input_ids"]
    with safe_open(str(out / "model.safetensors"), "pt") as weights:
        shapes = {name: weights.get_slice(name).get_shape() for name in weights.keys()}  # noqa: SIM118
    assert not [name for name in shapes if "classifier" in name]  # each side draws its head
    assert result["parameters"] == sum(math.prod(shape) for shape in shapes.values())


def test_an_unknown_shape_is_refused_by_name(tiny_bert: Path, tmp_path: Path) -> None:
    argv = ["random-model", "--shape", "large", "--tokenizer", str(tiny_bert), "--out", "x"]
    with pytest.raises(SystemExit):
        load_run().main(argv)
