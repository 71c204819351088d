"""Each family of the test matrix scores a row the same however its batch is laid out: alone,
padded with others, split into pieces, packed, or packed into one model row; and each fast
path serves the families whose heads it fits, checked on the model, not by its name."""

import logging
from pathlib import Path
from typing import Any

import pytest
import torch
from tiny_families import DECODERS, ENCODERS, FAMILIES, build_tiny_family
from tiny_models import DEFAULT_CORPUS
from transformers import (
    AutoModelForSequenceClassification,
    DataCollatorWithPadding,
    PreTrainedTokenizerBase,
)

from seqcls.data.model_files import load_tokenizer
from seqcls.data.packing import PackInOneRow, pack
from seqcls.data.padding_token import with_padding_token
from seqcls.model.classifier import SequenceClassifier
from seqcls.model.first_token import cuts_last_layer
from seqcls.model.mean_pooling import supports_mean_pooling
from seqcls.model.pretrained import match_padding_token, reads_both_ways

LABELS = ["account", "billing", "shipping", "technical"]
# The head reads position 0 of an encoder's output, and the last layer is laid out as BERT's.
CUT = {"bert", "deberta-v2", "electra", "roberta", "xlm-roberta"}
# Their heads read one position of their encoder's output (ModernBERT's has no encoder module).
MEAN = CUT | {"albert"}


def classifier_and_rows(
    family: str, tmp_path: Path
) -> tuple[SequenceClassifier, PreTrainedTokenizerBase, list[dict[str, Any]]]:
    checkpoint = str(build_tiny_family(family, tmp_path / family))
    module = SequenceClassifier(checkpoint, label_names=LABELS).eval()
    tokenizer = with_padding_token(load_tokenizer(checkpoint), checkpoint)
    rows = [
        {**tokenizer(text), "labels": row % len(LABELS), "index": row}
        for row, text in enumerate(DEFAULT_CORPUS[:7])
    ]
    return module, tokenizer, rows


@pytest.mark.parametrize("family", sorted(FAMILIES))
def test_every_layout_gives_each_rows_own_logits_and_loss(
    family: str, tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    module, tokenizer, rows = classifier_and_rows(family, tmp_path)
    pad = DataCollatorWithPadding(tokenizer)
    with torch.no_grad():
        alone = torch.cat([module(pad([row])).logits for row in rows])
        padded = module(pad(rows))
        pieces = torch.cat([module(pad(rows[:3])).logits, module(pad(rows[3:])).logits])
        with caplog.at_level(logging.INFO):
            packed = module(pack(rows, 40, tokenizer.pad_token_id))
            module(pack(rows, 40, tokenizer.pad_token_id))
        one_row = None
        if module.packed_forward.use_segments():
            one_row = module(PackInOneRow(tokenizer.pad_token_id)(rows)).logits
    for logits in (padded.logits, pieces, packed.logits, one_row):
        if logits is not None:
            torch.testing.assert_close(logits, alone, atol=1e-5, rtol=1e-4)
    torch.testing.assert_close(packed.loss, padded.loss, atol=1e-6, rtol=1e-5)
    # Packed batches run packed where the model is served, else unpacked, said once.
    unpacked = [r for r in caplog.records if "Packed batches run unpacked" in r.getMessage()]
    assert len(unpacked) == int(not module.takes_packed_batches)
    assert module.takes_packed_batches == (family in CUT)


@pytest.mark.parametrize("family", sorted(FAMILIES))
def test_fast_paths_serve_the_families_they_fit(family: str, tmp_path: Path) -> None:
    module, _, _ = classifier_and_rows(family, tmp_path)
    assert cuts_last_layer(module.model) == (family in CUT)
    # Asked of the model as loaded, before the classifier cuts its last layer.
    loaded = AutoModelForSequenceClassification.from_pretrained(tmp_path / family, num_labels=4)
    match_padding_token(loaded, str(tmp_path / family))
    assert supports_mean_pooling(loaded) == (family in MEAN)
    assert reads_both_ways(loaded) == (family in ENCODERS)
    if family in DECODERS:  # its head reads the last token, not a [CLS]: none drawn afresh
        assert module.hparams["reinit_layers"] == 0
    if family == "bert":
        assert module.hparams["reinit_layers"] == 1


@pytest.mark.parametrize("family", sorted(DECODERS))
def test_a_decoder_pads_with_its_end_of_sequence_token(family: str, tmp_path: Path) -> None:
    module, tokenizer, _ = classifier_and_rows(family, tmp_path)
    assert tokenizer.pad_token == tokenizer.eos_token
    assert tokenizer.padding_side == "right"
    assert module.model.config.pad_token_id == tokenizer.eos_token_id
