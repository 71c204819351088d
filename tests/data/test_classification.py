import csv
import logging
from pathlib import Path
from types import SimpleNamespace

import pytest
import torch
from pytorch_lightning.accelerators import CUDAAccelerator

import seqcls.data.encoding
import seqcls.data.rows
from seqcls.data.classification import TextClassificationDataModule
from seqcls.data.sub_batches import pieces_of
from seqcls.errors import ConfigurationError

TRAIN = [
    ("the parcel never arrived", "the courier lost it", "shipping"),
    ("i was charged twice", "refund please", "billing"),
    ("the app crashes on start", "error on login screen", "technical"),
    ("reset my password", "account locked", "account"),
] * 6


def write_csv(path: Path, rows: list[tuple[str, ...]], header: tuple[str, ...]) -> str:
    with path.open("w", newline="") as stream:
        writer = csv.writer(stream)
        writer.writerow(header)
        writer.writerows(rows)
    return str(path)


@pytest.fixture
def files(tmp_path: Path) -> dict[str, str]:
    header = ("question", "context", "topic")
    return {
        "train_file": write_csv(tmp_path / "train.csv", TRAIN, header),
        "validation_file": write_csv(tmp_path / "dev.csv", TRAIN[:8], header),
        "predict_file": write_csv(
            tmp_path / "new.csv", [(text,) for text, *_ in TRAIN[:5]], ("question",)
        ),
    }


@pytest.fixture
def make_data(files: dict[str, str], tiny_bert: Path, tmp_path: Path):
    def make(**overrides: object) -> TextClassificationDataModule:
        arguments: dict[str, object] = {
            **files,
            "text_column": "question",
            "label_column": "topic",
            "tokenizer_name_or_path": str(tiny_bert),
            "batch_size": 4,
            "cache_dir": str(tmp_path / "cache"),
            **overrides,
        }
        return TextClassificationDataModule(**arguments)  # type: ignore[arg-type]

    return make


def test_label_names_come_sorted_from_the_training_file(make_data) -> None:
    assert make_data().label_names == ["account", "billing", "shipping", "technical"]


def test_given_label_names_keep_their_order(make_data) -> None:
    names = ["technical", "shipping", "billing", "account"]
    data = make_data(label_names=names)
    data.setup("fit")
    assert data.label_names == names
    assert data.splits["train"][0]["labels"][:4] == [1, 2, 0, 3]


def test_columns_are_mapped_and_pairs_are_encoded_together(make_data) -> None:
    data = make_data(text_pair_column="context")
    data.setup("fit")
    row = data.splits["train"][0][0]
    assert row["labels"] == 2  # shipping
    assert row["index"] == 0
    assert data.tokenizer.decode(row["input_ids"]).count("[SEP]") == 2
    assert set(row["token_type_ids"]) == {0, 1}


def test_second_setup_reads_the_cache_instead_of_tokenizing(make_data, monkeypatch) -> None:
    calls: list[str] = []
    encode = seqcls.data.rows.encode_table

    def counting(source, **kwargs):
        calls.append(source.label)
        return encode(source, **kwargs)

    monkeypatch.setattr(seqcls.data.rows, "encode_table", counting)
    first = make_data()
    first.setup("fit")
    assert len(calls) == 2  # train and validation
    second = make_data()  # a new process would start like this
    second.setup("fit")
    assert len(calls) == 2
    assert second.splits["train"][0]["input_ids"] == first.splits["train"][0]["input_ids"]


def test_each_cache_entry_is_named_once_in_the_log(make_data, caplog) -> None:
    """A fit's prepare_data tokenizes and its setup reads the cache again: each split named
    once, not twice (here: two setups, as a second data module in one process)."""
    with caplog.at_level(logging.INFO, logger="seqcls.data.token_cache"):
        make_data().setup("fit")
        make_data().setup("fit")
    encoding = [record for record in caplog.records if record.name == "seqcls.data.token_cache"]
    lines = [record.getMessage().split(": ")[1] for record in encoding]
    assert sorted(line.split(" ")[0] for line in lines) == ["tokenizing", "tokenizing"]


@pytest.mark.parametrize(
    "change", [{"max_length": 8}, {"text_column": "context"}, {"text_pair_column": "context"}]
)
def test_changing_what_shapes_the_tokens_tokenizes_again(make_data, monkeypatch, change) -> None:
    make_data().setup("validate")
    calls: list[str] = []
    encode = seqcls.data.rows.encode_table
    monkeypatch.setattr(
        seqcls.data.rows,
        "encode_table",
        lambda src, **kw: calls.append(src.label) or encode(src, **kw),
    )
    make_data(**change).setup("validate")
    assert len(calls) == 1


def test_another_tokenizer_does_not_reuse_the_cache(make_data, tiny_roberta: Path) -> None:
    bert = make_data()
    bert.setup("validate")
    roberta = make_data(tokenizer_name_or_path=str(tiny_roberta))
    roberta.setup("validate")
    assert roberta.splits["validation"][0]["input_ids"][0][0] == roberta.tokenizer.bos_token_id
    assert bert.splits["validation"][0]["input_ids"][0][0] == bert.tokenizer.cls_token_id


def test_batches_pad_to_the_longest_on_cpu_and_round_to_eight_on_gpus(make_data) -> None:
    # Whole padded batches: sub-batches and packing are tested on their own.
    data = make_data(sub_batches=1, packing=False)
    data.setup("fit")
    batch = next(iter(data.val_dataloader()[0]))
    lengths = batch["attention_mask"].sum(dim=1)
    assert int(lengths.max()) == batch["input_ids"].shape[1]
    # Only isinstance() is asked of the accelerator, so none is constructed.
    gpu = object.__new__(CUDAAccelerator)
    data.trainer = SimpleNamespace(accelerator=gpu, world_size=1, global_rank=0)
    rounded = next(iter(data.val_dataloader()[0]))
    assert rounded["input_ids"].shape[1] % 8 == 0
    assert rounded["input_ids"].shape[1] - 8 < int(lengths.max())
    assert batch["labels"].dtype == torch.long
    assert batch["index"].tolist() == [0, 1, 2, 3]


def test_max_length_padding_gives_one_shape(make_data) -> None:
    data = make_data(padding="max_length", max_length=24)
    data.setup("fit")
    shapes = {tuple(batch["input_ids"].shape) for batch in data.train_dataloader()}
    assert shapes == {(4, 24)}


def test_truncation_respects_max_length(make_data) -> None:
    data = make_data(max_length=5, text_pair_column="context")
    data.setup("fit")
    assert max(len(ids) for ids in data.splits["train"][0]["input_ids"]) == 5


def test_train_loader_shuffles_and_eval_loaders_do_not(make_data) -> None:
    data = make_data()
    data.setup("fit")
    torch.manual_seed(0)
    train = data.train_dataloader()  # one loader, two epochs: each gets its own order
    first = torch.cat([piece["index"] for batch in train for piece in pieces_of(batch)]).tolist()
    second = torch.cat([piece["index"] for batch in train for piece in pieces_of(batch)]).tolist()
    assert sorted(first) == list(range(len(TRAIN)))
    assert first != list(range(len(TRAIN)))
    assert first != second
    batches = [torch.cat([p["index"] for p in pieces_of(b)]) for b in data.val_dataloader()[0]]
    # Batches in file order; inside a batch, sub-batches order rows by length.
    assert [sorted(batch.tolist()) for batch in batches] == [[0, 1, 2, 3], [4, 5, 6, 7]]


def test_max_train_samples_keeps_the_first_rows(make_data) -> None:
    data = make_data(max_train_samples=6)
    data.setup("fit")
    assert data.splits["train"][0]["index"] == list(range(6))
    assert len(data.splits["validation"][0]) == 8


def test_predict_needs_no_label_column(make_data) -> None:
    data = make_data(label_names=["account", "billing", "shipping", "technical"])
    data.setup("predict")
    pieces = pieces_of(next(iter(data.predict_dataloader())))
    assert all("labels" not in piece for piece in pieces)
    assert sorted(torch.cat([piece["index"] for piece in pieces]).tolist()) == [0, 1, 2, 3]


def test_training_examples_are_shown_decoded(make_data, caplog) -> None:
    with caplog.at_level(logging.INFO):
        make_data().setup("fit")
    shown = [
        record.getMessage()
        for record in caplog.records
        if "Training example" in record.getMessage()
    ]
    assert len(shown) == 2
    assert "[shipping]" in shown[0]
    assert "parcel" in shown[0]


def test_unseen_validation_label_is_a_clear_error(make_data, tmp_path: Path) -> None:
    dev = write_csv(
        tmp_path / "odd.csv", [("hello", "x", "refunds")], ("question", "context", "topic")
    )
    data = make_data(validation_file=dev)
    with pytest.raises(ConfigurationError, match=r"odd.csv, column 'topic'.*'refunds'"):
        data.setup("validate")


def test_missing_column_names_the_flag(make_data) -> None:
    data = make_data(text_column="sentence")
    with pytest.raises(ConfigurationError, match=r"'sentence' \(--data.text_column\)"):
        data.setup("fit")


def test_without_validation_file_a_stratified_share_of_train_is_held_out(make_data) -> None:
    data = make_data(validation_file=None, validation_fraction=0.25)
    data.setup("fit")
    train, held = data.splits["train"][0], data.splits["validation"][0]
    # A quarter of each class's six rows, rounded: two per class.
    assert sorted(held["labels"]) == [0, 0, 1, 1, 2, 2, 3, 3]
    assert set(train["index"]).isdisjoint(held["index"])
    assert len(train) + len(held) == len(TRAIN)
    again = make_data(validation_file=None, validation_fraction=0.25)
    again.setup("fit")
    assert again.splits["validation"][0]["index"] == held["index"]


def test_a_validation_fraction_of_0_holds_out_nothing(make_data) -> None:
    data = make_data(validation_file=None, validation_fraction=0)
    data.setup("fit")
    assert len(data.splits["train"][0]) == len(TRAIN)
    assert data.splits["validation"] == []
    assert data.val_dataloader() == []


def test_missing_test_split_names_the_flag(make_data) -> None:
    data = make_data()
    with pytest.raises(ConfigurationError, match=r"no test data: pass --data\.test_file"):
        data.setup("test")


def test_empty_text_names_the_row(make_data, tmp_path: Path) -> None:
    train = write_csv(
        tmp_path / "holes.csv", [("ok", "x", "a"), ("", "x", "b")], ("question", "context", "topic")
    )
    data = make_data(train_file=train)
    with pytest.raises(ConfigurationError, match="row 1"):
        data.setup("fit")


def test_train_fraction_takes_a_seeded_share_then_max_train_samples_caps(make_data) -> None:
    data = make_data(train_fraction=0.5)
    data.setup("fit")
    half = data.splits["train"][0]["index"]
    assert len(half) == 12
    assert half == sorted(half)
    assert half != list(range(12))
    again = make_data(train_fraction=0.5)
    again.setup("fit")
    assert again.splits["train"][0]["index"] == half
    capped = make_data(train_fraction=0.5, max_train_samples=5)
    capped.setup("fit")
    assert capped.splits["train"][0]["index"] == half[:5]


def test_only_the_chosen_training_rows_are_tokenized(make_data, monkeypatch) -> None:
    full = make_data()
    full.setup("fit")
    sizes: list[int] = []
    tokenize = seqcls.data.encoding.tokenize_rows
    monkeypatch.setattr(
        seqcls.data.encoding,
        "tokenize_rows",
        lambda table, encode, **kw: sizes.append(len(table)) or tokenize(table, encode, **kw),
    )
    data = make_data(train_fraction=0.5, max_train_samples=5)
    data.setup("fit")
    assert sizes == [5]  # validation came from the cache: only the 5 training rows were new
    (train,) = data.splits["train"]
    chosen = train["index"]
    # The same rows, numbered as in the file, with the same tokens and labels as a full run.
    (everything,) = full.splits["train"]
    assert train["input_ids"] == everything.select(chosen)["input_ids"]
    assert train["labels"] == everything.select(chosen)["labels"]


def test_tokenizing_in_several_processes_gives_the_same_rows(make_data, tmp_path: Path) -> None:
    serial = make_data()
    serial.setup("fit")
    parallel = make_data(num_proc=2, cache_dir=str(tmp_path / "other-cache"))
    parallel.setup("fit")
    assert parallel.splits["train"][0]["input_ids"] == serial.splits["train"][0]["input_ids"]
    assert parallel.splits["train"][0]["index"] == list(range(len(TRAIN)))


def test_multi_label_csv_cells_split_on_the_separator(make_data, tmp_path: Path) -> None:
    rows = [
        ("late parcel and double charge", "x", "shipping|billing"),
        ("app crash", "x", "technical"),
    ]
    train = write_csv(tmp_path / "multi.csv", rows * 4, ("question", "context", "topic"))
    data = make_data(train_file=train, validation_file=train, label_separator="|")
    data.setup("fit")
    assert data.problem_type == "multi_label_classification"
    assert data.label_names == ["billing", "shipping", "technical"]
    assert data.splits["train"][0]["labels"][:2] == [[1.0, 1.0, 0.0], [0.0, 0.0, 1.0]]


def test_rows_cut_by_max_length_are_counted_per_file(make_data, caplog) -> None:
    with caplog.at_level(logging.INFO, logger="seqcls.data.inspection"):
        make_data(max_length=4).setup("fit")
    notes = truncation_notes(caplog)
    assert [note.split(":")[0] for note in notes] == ["--data.train_file", "--data.validation_file"]
    assert "24 of 24 rows (100.0%) reach --data.max_length 4" in notes[0]
    caplog.clear()
    with caplog.at_level(logging.INFO, logger="seqcls.data.inspection"):
        make_data().setup("fit")  # max_length 128: nothing is cut, nothing is said
    assert truncation_notes(caplog) == []


def inspection_notes(caplog: pytest.LogCaptureFixture, part: str) -> list[tuple[int, str]]:
    """The level and text of each line of seqcls.data.inspection that contains ``part``."""
    said = [record for record in caplog.records if record.name == "seqcls.data.inspection"]
    return [(record.levelno, record.getMessage()) for record in said if part in record.msg]


def truncation_notes(caplog: pytest.LogCaptureFixture) -> list[str]:
    return [note for _, note in inspection_notes(caplog, "reach --data.max_length")]


def seen_notes(caplog: pytest.LogCaptureFixture) -> list[tuple[int, str]]:
    return inspection_notes(caplog, "training row")


def test_validation_rows_that_also_train_are_counted(make_data, caplog, tmp_path: Path) -> None:
    seen, relabelled = TRAIN[0], (*TRAIN[1][:2], "shipping")
    unseen = ("where is my order", "tracking shows nothing", "shipping")
    header = ("question", "context", "topic")
    dev = write_csv(tmp_path / "dev-seen.csv", [seen, relabelled, unseen], header)
    data = make_data(validation_file=dev, text_pair_column="context")
    with caplog.at_level(logging.INFO, logger="seqcls.data.inspection"):
        data.setup("fit")
    assert data.seen_rows == {"--data.validation_file": (2, 3)}  # for the model card
    assert seen_notes(caplog) == [(logging.WARNING, (
        "--data.validation_file: 2 of 3 rows (66.7%) have the same tokens as a training row, "
        "1 of them with another label there; the validation metrics count them as unseen. "
        "To score unseen rows only, remove them from one of the files"
    ))]  # fmt: skip
    caplog.clear()
    # Only the rows that train count: with the first training row alone, one row is seen.
    with caplog.at_level(logging.INFO, logger="seqcls.data.inspection"):
        make_data(validation_file=dev, text_pair_column="context", max_train_samples=1).setup("fit")
    assert [note for _, note in seen_notes(caplog)] == [
        "--data.validation_file: 1 of 3 rows (33.3%) have the same tokens as a training row; "
        "the validation metrics count them as unseen. To score unseen rows only, remove them "
        "from one of the files"
    ]


def test_a_held_out_validation_set_is_not_checked(make_data, caplog) -> None:
    with caplog.at_level(logging.INFO, logger="seqcls.data.inspection"):
        make_data(validation_file=None).setup("fit")
    assert seen_notes(caplog) == []
