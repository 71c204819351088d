"""TextCorpusDataModule: documents from any file, packed into full blocks, masked for MLM."""

from pathlib import Path

import pytest
import torch

from seqcls.errors import ConfigurationError
from seqcls.mlm.corpus import TextCorpusDataModule

IGNORED = -100


def corpus(tmp_path: Path, tokenizer: Path, text: str, **options: object) -> TextCorpusDataModule:
    path = tmp_path / "corpus.txt"
    path.write_text(text)
    return TextCorpusDataModule(
        train_file=str(path),
        tokenizer_name_or_path=str(tokenizer),
        cache_dir=str(tmp_path / "cache"),
        **options,  # type: ignore[arg-type]
    )


LINES = [f"the parcel number {n} arrived late and the box was damaged" for n in range(60)]


def test_text_lines_become_full_blocks_with_held_out_documents(
    tmp_path: Path, tiny_bert: Path
) -> None:
    data = corpus(tmp_path, tiny_bert, "\n\n".join(LINES) + "\n", max_length=32)
    data.setup("fit")
    train, validation = data.splits["train"], data.splits["validation"]
    blocks = list(train["input_ids"]) + list(validation["input_ids"])
    assert {len(ids) for ids in blocks} == {32}
    documents = sum(ids.count(data.tokenizer.cls_token_id) for ids in blocks)
    # Blank lines are no documents; only the tail of the last block may be cut off.
    assert len(LINES) - 2 <= documents <= len(LINES)
    assert len(validation) >= 1


def test_training_masks_about_15_percent_and_dev_masks_never_change(
    tmp_path: Path, tiny_bert: Path
) -> None:
    data = corpus(tmp_path, tiny_bert, "\n".join(LINES * 10), max_length=32)
    data.setup("fit")
    rows = [data.splits["train"][i] for i in range(len(data.splits["train"]))]
    batch = data.masking()(rows)
    share = float((batch["labels"] != IGNORED).float().mean())
    assert 0.10 < share < 0.20
    fixed = data.masking(fixed=True)
    first, again = fixed(rows[:8]), fixed(rows[:8])
    assert torch.equal(first["input_ids"], again["input_ids"])
    # Each block's mask depends on the block alone, not on the batch it comes in.
    assert torch.equal(fixed(rows[3:4])["labels"][0], first["labels"][3])


def test_whole_word_masking_masks_every_piece_of_a_word(tmp_path: Path, tiny_bert: Path) -> None:
    data = corpus(tmp_path, tiny_bert, "\n".join(LINES * 10), max_length=32, whole_word_mask=True)
    data.setup("fit")
    rows = [data.splits["train"][i] for i in range(len(data.splits["train"]))]
    batch = data.masking()(rows)
    masked = batch["labels"] != IGNORED
    tokens = [data.tokenizer.convert_ids_to_tokens(ids) for ids in batch["labels"].clamp(min=0)]
    for row, flags in enumerate(masked.tolist()):
        for position in range(1, len(flags)):
            if tokens[row][position].startswith("##"):  # a word's continuation piece
                assert flags[position] == flags[position - 1]


def test_too_little_text_names_the_flag(tmp_path: Path, tiny_bert: Path) -> None:
    data = corpus(tmp_path, tiny_bert, "one short line\n", max_length=64)
    with pytest.raises(ConfigurationError, match=r"--data.max_length 64"):
        data.setup("validate")


def test_a_pair_column_gives_two_documents_per_row(tmp_path: Path, tiny_bert: Path) -> None:
    path = tmp_path / "pairs.csv"
    rows = [f"the parcel {n} arrived late,the box {n} was damaged,1" for n in range(100)]
    path.write_text("premise,hypothesis,label\n" + "\n".join(rows) + "\n")
    options = {"tokenizer_name_or_path": str(tiny_bert), "cache_dir": str(tmp_path / "cache")}
    documents = {}
    for pair in [None, "hypothesis"]:
        data = TextCorpusDataModule(
            train_file=str(path),
            text_column="premise",
            text_pair_column=pair,
            max_length=8,
            **options,  # type: ignore[arg-type]
        )
        data.setup("fit")
        tokens = [t for ids in data.splits["train"]["input_ids"] for t in ids]
        documents[pair] = tokens.count(data.tokenizer.cls_token_id)
        text = data.tokenizer.decode(tokens)
        assert ("damaged" in text) == (pair is not None)
    assert documents["hypothesis"] >= 2 * documents[None] - 2
    with pytest.raises(ConfigurationError, match=r"text_pair_column"):
        TextCorpusDataModule(train_file=str(path), text_column="premise",
                             text_pair_column="second", **options).setup("fit")  # fmt: skip
