"""TextCorpusDataModule: documents from any file, packed into full blocks, masked for MLM."""

from pathlib import Path

import pytest
import torch

from seqcls.data.sources import Source
from seqcls.errors import ConfigurationError
from seqcls.mlm.blocks import CorpusSpec, stack_blocks, tokenize_corpus
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


def test_a_validation_fraction_of_0_trains_on_every_document(
    tmp_path: Path, tiny_bert: Path
) -> None:
    every = corpus(tmp_path, tiny_bert, "\n\n".join(LINES) + "\n", max_length=32,
                   validation_fraction=0)  # fmt: skip
    every.setup("fit")
    held = corpus(tmp_path, tiny_bert, "\n\n".join(LINES) + "\n", max_length=32)
    held.setup("fit")
    assert "validation" not in every.splits
    # Each split's last block is cut short, so blocks do not add up: 30 against 28 + 1.
    assert len(every.splits["train"]) > len(held.splits["train"])


def test_training_masks_about_15_percent_and_dev_masks_never_change(
    tmp_path: Path, tiny_bert: Path
) -> None:
    data = corpus(tmp_path, tiny_bert, "\n".join(LINES * 10), max_length=32)
    data.setup("fit")
    rows = [data.splits["train"][i] for i in range(len(data.splits["train"]))]
    batch = data.masking().mask_blocks(stack_blocks(rows), epoch=0)
    share = float((batch["labels"] != IGNORED).float().mean())
    assert 0.10 < share < 0.20
    fixed = data.masking()
    first, again = fixed(rows[:8]), fixed(rows[:8])
    assert torch.equal(first["input_ids"], again["input_ids"])
    # Each block's mask depends on the block alone, not on the batch it comes in.
    assert torch.equal(fixed(rows[3:4])["labels"][0], first["labels"][3])


def test_a_training_mask_depends_on_the_seed_the_epoch_and_the_block_alone(
    tmp_path: Path, tiny_bert: Path
) -> None:
    """Not on torch's global random state, which a resumed run has not put back yet when
    Lightning collates its first batch, nor on the batch: a resumed run masks as it would have."""
    data = corpus(tmp_path, tiny_bert, "\n".join(LINES * 10), max_length=32, batch_size=4)
    data.setup("fit")

    def epoch(number: int, global_seed: int, workers: int = 0) -> list[dict[str, torch.Tensor]]:
        data.num_workers = workers
        loader = data.train_dataloader()
        torch.manual_seed(global_seed)
        loader.sampler.set_epoch(number)  # as Lightning does before each epoch
        return list(loader)

    first = epoch(1, global_seed=0)
    # Persistent loader workers never learn the epoch: the masks are drawn outside them.
    again = epoch(1, global_seed=1, workers=1)
    assert all(torch.equal(a["labels"], b["labels"]) for a, b in zip(first, again, strict=True))
    assert all(
        torch.equal(a["input_ids"], b["input_ids"]) for a, b in zip(first, again, strict=True)
    )
    # New masks every epoch, for the same blocks (the order comes from the epoch too).
    blocks = stack_blocks([data.splits["train"][i] for i in range(8)])
    masks = [data.masking().mask_blocks(blocks, epoch=n)["labels"] for n in (0, 1)]
    assert not torch.equal(masks[0], masks[1])
    one = stack_blocks([data.splits["train"][3]])
    assert torch.equal(data.masking().mask_blocks(one, epoch=1)["labels"][0], masks[1][3])


def test_whole_word_masking_masks_every_piece_of_a_word(tmp_path: Path, tiny_bert: Path) -> None:
    data = corpus(tmp_path, tiny_bert, "\n".join(LINES * 10), max_length=32, whole_word_mask=True)
    data.setup("fit")
    rows = [data.splits["train"][i] for i in range(len(data.splits["train"]))]
    batch = data.masking().mask_blocks(stack_blocks(rows), epoch=0)
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


@pytest.mark.parametrize(
    ("name", "text"),
    [
        ("docs.csv", 'text\nthe parcel arrived late\n""\n"  "\nthe box was damaged\n'),
        (
            "docs.jsonl",
            '{"text": "the parcel arrived late"}\n{"text": ""}\n{"text": " \\t"}\n'
            '{"text": null}\n{"text": "the box was damaged"}\n',
        ),
        ("docs.txt", "the parcel arrived late\n\n  \nthe box was damaged\n"),
    ],
)
def test_empty_and_blank_cells_are_no_documents(
    tmp_path: Path, tiny_bert: Path, name: str, text: str
) -> None:
    path = tmp_path / name
    path.write_text(text)
    data = corpus(tmp_path, tiny_bert, "")
    spec = CorpusSpec("text", None, offsets=False)
    documents = tokenize_corpus(
        Source("--data.train_file", path=str(path)), tokenizer=data.tokenizer, spec=spec, key="k"
    )
    decoded = [
        data.tokenizer.decode(ids, skip_special_tokens=True) for ids in documents["input_ids"]
    ]
    assert decoded == ["the parcel arrived late", "the box was damaged"]


def test_a_cell_that_is_no_text_is_refused_with_its_row(tmp_path: Path, tiny_bert: Path) -> None:
    path = tmp_path / "docs.jsonl"
    path.write_text('{"text": "the parcel arrived late"}\n{"text": ""}\n{"text": 5}\n')
    data = corpus(tmp_path, tiny_bert, "")
    spec = CorpusSpec("text", None, offsets=False)
    with pytest.raises(ConfigurationError, match=r"docs.jsonl: column 'text' row 2 .* is 5"):
        tokenize_corpus(
            Source("--data.train_file", path=str(path)),
            tokenizer=data.tokenizer,
            spec=spec,
            key="k",
        )


def test_too_few_held_out_tokens_name_the_held_out_documents_and_the_fixes(
    tmp_path: Path, tiny_bert: Path
) -> None:
    """The file fills many blocks; the 5% held out of it for validation fill none."""
    data = corpus(tmp_path, tiny_bert, "\n".join(LINES[:26]), max_length=64)
    with pytest.raises(ConfigurationError) as refused:
        data.setup("fit")
    assert str(refused.value).startswith(
        f"the validation documents held out of {tmp_path / 'corpus.txt'} "
        "(--data.validation_fraction 0.05): "
    )
    for fix in ["--data.validation_fraction", "--data.validation_file", "--data.max_length"]:
        assert fix in str(refused.value)
