"""Text pairs encoded separately (--data.pair_encoding separate): each text tokenized on its
own, each side of a batch padded to its own longest, the default read from the model, and the
options that cannot work with it refused in one line."""

import csv
import json
import logging
from pathlib import Path
from typing import Any

import pytest
import torch
from datasets import Dataset
from pytorch_lightning.accelerators import CPUAccelerator, CUDAAccelerator, XLAAccelerator
from sample_data import fake_trainer
from tiny_models import as_sentence_encoder

import seqcls.data.rows
import seqcls.sentence_encoder
from seqcls.data.classification import TextClassificationDataModule
from seqcls.data.columns import INDEX, LABELS, PAIR_ATTENTION_MASK, PAIR_INPUT_IDS
from seqcls.data.inspection import token_keys
from seqcls.data.pair_batches import PairPadding
from seqcls.errors import ConfigurationError
from seqcls.sentence_encoder import sentence_encoder_pooling

# Short questions beside long passages, and the other way round: the two sides of a batch
# have different longest rows.
ROWS = [
    ("where is my parcel", "the courier says it was left at a neighbour two days ago", "yes", 4.5),
    ("why was i charged twice this month for one order", "refund", "no", 1.25),
    ("the app crashes", "it closes as soon as the login screen shows up on my phone", "yes", 3.0),
    ("reset my password", "my account is locked", "no", 0.5),
] * 3
SEPARATE_KEYS = {"input_ids", "attention_mask", PAIR_INPUT_IDS, PAIR_ATTENTION_MASK}


def write_csv(path: Path, rows: list[tuple[Any, ...]]) -> str:
    with path.open("w", newline="") as stream:
        writer = csv.writer(stream)
        writer.writerow(("question", "passage", "answer", "score"))
        writer.writerows(rows)
    return str(path)


@pytest.fixture
def make_data(tiny_bert: Path, tmp_path: Path):
    train = write_csv(tmp_path / "train.csv", ROWS)
    validation = write_csv(tmp_path / "dev.csv", ROWS[:4])

    def make(**overrides: Any) -> TextClassificationDataModule:
        arguments: dict[str, Any] = {
            "train_file": train,
            "validation_file": validation,
            "predict_file": validation,
            "text_column": "question",
            "text_pair_column": "passage",
            "label_column": "answer",
            "pair_encoding": "separate",
            "tokenizer_name_or_path": str(tiny_bert),
            "batch_size": 4,
            "cache_dir": str(tmp_path / "cache"),
            **overrides,
        }
        return TextClassificationDataModule(**arguments)

    return make


def model_folder(path: Path, **config: Any) -> str:
    """A model folder holding only config.json: all the pair encoding's default reads."""
    path.mkdir()
    (path / "config.json").write_text(json.dumps({"model_type": "bert", **config}))
    return str(path)


def test_each_text_of_a_pair_is_tokenized_on_its_own(make_data) -> None:
    data = make_data(max_length=8)
    data.setup("fit")
    (train,) = data.splits["train"]
    assert set(train.column_names) == SEPARATE_KEYS | {INDEX, LABELS}
    for number, (question, passage, *_) in enumerate(ROWS):
        alone = [
            data.tokenizer(text, truncation=True, max_length=8) for text in (question, passage)
        ]
        row = train[number]
        assert row[INDEX] == number
        assert row["input_ids"] == alone[0]["input_ids"]
        assert row["attention_mask"] == alone[0]["attention_mask"]
        assert row[PAIR_INPUT_IDS] == alone[1]["input_ids"]
        assert row[PAIR_ATTENTION_MASK] == alone[1]["attention_mask"]
    # Each side is cut to max_length on its own: a long passage keeps a whole short question.
    assert train[0]["input_ids"] == data.tokenizer("where is my parcel")["input_ids"]
    assert len(train[0][PAIR_INPUT_IDS]) == 8


def test_each_side_of_a_batch_is_padded_to_its_own_longest(make_data) -> None:
    data = make_data(sub_batches=1)  # one piece: sub-batches have a test of their own
    data.setup("fit")
    (validation,) = data.val_dataloader()
    (batch,) = list(validation)
    assert isinstance(batch, dict)
    assert set(batch) == SEPARATE_KEYS | {INDEX, LABELS}
    rows = data.splits["validation"][0]
    for ids, mask in [("input_ids", "attention_mask"), (PAIR_INPUT_IDS, PAIR_ATTENTION_MASK)]:
        lengths = [len(row) for row in rows[ids]]
        assert batch[ids].shape == (4, max(lengths))
        assert batch[mask].sum(dim=1).tolist() == lengths
        assert batch[ids][batch[mask] == 0].eq(data.tokenizer.pad_token_id).all()
    assert batch["input_ids"].shape[1] != batch[PAIR_INPUT_IDS].shape[1]
    assert batch[INDEX].tolist() == [0, 1, 2, 3]  # in file order, so predictions stay in order
    assert batch[LABELS].dtype == torch.long
    assert batch[LABELS].tolist() == [1, 0, 1, 0]
    # Training batches are whole (no sub-batches, no packing) and shuffled; on a GPU each side
    # is rounded up to a multiple of 8.
    data.trainer = fake_trainer(CUDAAccelerator)
    trained = list(data.train_dataloader())
    assert sorted(i for batch in trained for i in batch[INDEX].tolist()) == list(range(12))
    for batch in trained:
        assert batch["input_ids"].shape[1] % 8 == 0
        assert batch[PAIR_INPUT_IDS].shape[1] % 8 == 0
        assert batch["input_ids"].shape[1] - 8 < int(batch["attention_mask"].sum(dim=1).max())
    data.setup("predict")
    predicted = list(data.predict_dataloader())
    assert [batch[INDEX].tolist() for batch in predicted] == [[0, 1, 2, 3]]
    assert LABELS not in predicted[0]


def test_fixed_widths_and_left_padding() -> None:
    features = [
        {"input_ids": [5, 6, 7], "attention_mask": [1, 1, 1], PAIR_INPUT_IDS: [8],
         PAIR_ATTENTION_MASK: [1], INDEX: 3, LABELS: 0.5},
        {"input_ids": [5], "attention_mask": [1], PAIR_INPUT_IDS: [8, 9, 9, 9, 9],
         PAIR_ATTENTION_MASK: [1, 1, 1, 1, 1], INDEX: 4, LABELS: 2.0},
    ]  # fmt: skip
    batch = PairPadding(0, lengths=[4, 8], left=True)(features)
    assert batch["input_ids"].tolist() == [[0, 5, 6, 7], [0, 0, 0, 5]]
    assert batch["attention_mask"].tolist() == [[0, 1, 1, 1], [0, 0, 0, 1]]
    assert batch[PAIR_INPUT_IDS].shape == (2, 8)
    assert batch[PAIR_ATTENTION_MASK].sum(dim=1).tolist() == [1, 5]
    assert batch[LABELS].dtype == torch.float32
    assert batch[INDEX].tolist() == [3, 4]


def test_max_length_padding_pads_both_sides_to_it(make_data) -> None:
    data = make_data(padding="max_length", max_length=24)
    data.setup("fit")
    for batch in data.train_dataloader():
        assert batch["input_ids"].shape == batch[PAIR_INPUT_IDS].shape == (4, 24)


def test_joint_and_separate_are_cached_apart(make_data, monkeypatch) -> None:
    joint = make_data(pair_encoding="joint")
    joint.setup("validate")
    calls: list[str] = []
    encode = seqcls.data.rows.encode_table
    monkeypatch.setattr(
        seqcls.data.rows,
        "encode_table",
        lambda source, **kwargs: calls.append(source.label) or encode(source, **kwargs),
    )
    separate = make_data()
    separate.setup("validate")
    assert len(calls) == 1  # not the joint rows from the cache
    assert PAIR_INPUT_IDS in separate.splits["validation"][0].column_names
    assert PAIR_INPUT_IDS not in joint.splits["validation"][0].column_names
    make_data().setup("validate")
    assert len(calls) == 1  # the separate rows are cached in their own entry


def test_unset_the_model_says_how_it_read_its_pairs(make_data, tmp_path: Path) -> None:
    separate = model_folder(tmp_path / "bi-encoder", seqcls_pair_encoding="separate")
    plain = model_folder(tmp_path / "plain")
    empty = tmp_path / "empty"
    empty.mkdir()
    for model, expected in [
        (separate, "separate"),
        (plain, "joint"),
        (str(empty), "joint"),  # no config.json
        ("google-bert/bert-base-uncased", "joint"),  # a hub id: no fine-tuned encoding
    ]:
        data = make_data(pair_encoding=None, tokenizer_name_or_path=model)
        assert data.pair_encoding == expected, model
    assert make_data(pair_encoding="joint", tokenizer_name_or_path=separate).pair_encoding == (
        "joint"
    )
    # Single texts: a model that reads pairs separately cannot read one text alone.
    with pytest.raises(ConfigurationError) as error:
        make_data(pair_encoding=None, text_pair_column=None, tokenizer_name_or_path=separate)
    assert str(error.value).startswith(
        "--data.pair_encoding separate (the model's, from its config.json) needs "
        "--data.text_pair_column"
    )
    single = make_data(pair_encoding=None, text_pair_column=None, tokenizer_name_or_path=plain)
    assert single.pair_encoding == "joint"
    # The resolved choice is recorded, so a later command with the base model reads it too.
    assert make_data(tokenizer_name_or_path=plain).derived_config()["pair_encoding"] == "separate"
    assert "pair_encoding" not in single.derived_config()


def test_unset_a_sentence_encoders_similarity_scores_are_read_apart(
    make_data, tiny_bert: Path, tmp_path: Path, caplog
) -> None:
    (tmp_path / "encoder").mkdir()
    encoder = str(as_sentence_encoder(tiny_bert, tmp_path / "encoder"))
    scores = {"pair_encoding": None, "tokenizer_name_or_path": encoder, "label_column": "score"}
    with caplog.at_level(logging.INFO):
        assert make_data(**scores).pair_encoding == "separate"
    assert f"as the sentence encoder {encoder} was trained to compare texts" in caplog.text
    assert make_data(**scores, problem_type="regression").pair_encoding == "separate"
    # Classification pairs, a model that is no sentence encoder, or what separate pairs
    # cannot do: joint, as it is when asked for.
    for overrides in [
        {"label_column": "answer"},
        {"tokenizer_name_or_path": str(tiny_bert)},
        {"packing": True},
        {"pair_encoding": "joint"},
    ]:
        assert make_data(**{**scores, **overrides}).pair_encoding == "joint", overrides
    # A sentence encoder that seqcls fine-tuned jointly keeps reading its pairs jointly.
    saved = Path(model_folder(tmp_path / "fine-tuned", seqcls_pair_encoding="joint"))
    for name in ("modules.json", "1_Pooling"):
        (saved / name).symlink_to(Path(encoder) / name)
    assert make_data(**{**scores, "tokenizer_name_or_path": str(saved)}).pair_encoding == "joint"
    single = make_data(**scores, text_pair_column=None)
    assert single.pair_encoding == "joint"


def test_a_hub_sentence_encoders_pooling_is_read_from_the_hub_once(
    tmp_path: Path, monkeypatch
) -> None:
    files = {
        "modules.json": '[{"path": "1_Pooling", "type": "sentence_transformers.models.Pooling"}]',
        "1_Pooling/config.json": '{"pooling_mode_mean_tokens": true}',
    }
    cache: dict[str, str] = {}
    asked: list[str] = []

    def download(repo: str, name: str) -> str:
        asked.append(name)
        path = tmp_path / name.replace("/", "-")
        path.write_text(files[name])
        cache[name] = str(path)
        return str(path)

    monkeypatch.setattr(seqcls.sentence_encoder, "hf_hub_download", download)
    monkeypatch.setattr(
        seqcls.sentence_encoder, "try_to_load_from_cache", lambda repo, name: cache.get(name)
    )
    assert sentence_encoder_pooling("owner/encoder") == "mean"
    assert sentence_encoder_pooling("owner/encoder") == "mean"
    assert asked == ["modules.json", "1_Pooling/config.json"]  # the second time from the cache
    files["modules.json"] = "[]"  # no pooling module: nothing declared
    cache.clear()
    assert sentence_encoder_pooling("owner/other") is None


def test_an_unknown_value_in_the_models_config_is_one_line(make_data, tmp_path: Path) -> None:
    model = model_folder(tmp_path / "odd", seqcls_pair_encoding="apart")
    with pytest.raises(ConfigurationError) as error:
        make_data(pair_encoding=None, tokenizer_name_or_path=model)
    assert str(error.value) == (
        f"--model.model_name_or_path {model}: its config.json's seqcls_pair_encoding is "
        "'apart', not joint or separate; give --data.pair_encoding"
    )


SEPARATE = "--data.pair_encoding separate"


@pytest.mark.parametrize(
    ("overrides", "message"),
    [
        (
            {"text_pair_column": None},
            f"{SEPARATE} needs --data.text_pair_column: a single text has no pair to encode "
            "separately; give the column of the second texts, or unset --data.pair_encoding",
        ),
        (
            {"text_pair_column": None, "window_stride": 64},
            f"{SEPARATE}: windows (--data.window_stride) cut one text, not a pair encoded "
            "separately; unset one of them",
        ),
        (
            {"packing": True},
            f"--data.packing true: pairs encoded separately ({SEPARATE}) are padded per side, "
            "not packed; set --data.packing auto or false",
        ),
    ],
)
def test_what_cannot_work_with_separate_pairs_is_one_line(
    make_data, overrides: dict[str, Any], message: str
) -> None:
    with pytest.raises(ConfigurationError) as error:
        make_data(**overrides)
    assert str(error.value) == message


def test_a_refusal_says_when_the_encoding_came_from_the_model(make_data, tmp_path: Path) -> None:
    model = model_folder(tmp_path / "bi-encoder", seqcls_pair_encoding="separate")
    with pytest.raises(ConfigurationError) as error:
        make_data(pair_encoding=None, tokenizer_name_or_path=model, packing=True)
    assert str(error.value) == (
        "--data.packing true: pairs encoded separately (--data.pair_encoding separate (the "
        "model's, from its config.json)) are padded per side, not packed; set --data.packing "
        "auto or false"
    )
    # What works anyway is accepted: packing off, one pass.
    make_data(packing=False, sub_batches=1)


def test_separate_pairs_are_refused_on_xla(make_data) -> None:
    data = make_data()
    data.setup("fit")
    data.setup("predict")
    data.trainer = fake_trainer(XLAAccelerator)
    data.trainer.lightning_module = type("Model", (), {"takes_packed_batches": True})()
    message = (
        "pairs encoded separately (--data.pair_encoding separate, given or chosen for a "
        "sentence encoder's similarity scores) run on CPU and GPU; on XLA give "
        "--data.pair_encoding joint"
    )
    for loader in (data.train_dataloader, data.val_dataloader, data.predict_dataloader):
        with pytest.raises(ConfigurationError) as error:
            loader()
        assert str(error.value) == message


def test_regression_label_range_is_the_training_rows(make_data) -> None:
    data = make_data(label_column="score", max_train_samples=3, sub_batches=1)
    data.setup("fit")
    assert data.problem_type == "regression"
    assert data.regression_label_range() == (1.25, 4.5)  # of 4.5, 1.25, 3.0, not 0.5
    batch = next(iter(data.train_dataloader()))
    assert batch[LABELS].dtype == torch.float32


def test_rows_are_seen_and_shown_by_both_texts(make_data, caplog) -> None:
    caplog.set_level("INFO")
    data = make_data()
    data.setup("fit")
    # Every validation row is a training row: both of its texts match one.
    assert data.seen_rows == {"--data.validation_file": (4, 4)}
    (train,) = data.splits["train"]
    keys = token_keys(train)
    first, second = train[0]["input_ids"], train[0][PAIR_INPUT_IDS]
    # The same first text with another second is another pair; so is another split of the
    # same ids between the two.
    rows = Dataset.from_dict(
        {
            "input_ids": [first, first, first + second[:1]],
            PAIR_INPUT_IDS: [second, second[:1], second[1:]],
        }
    )
    assert token_keys(rows)[0] == keys[0]
    assert len(set(token_keys(rows))) == 3
    shown = [
        record.getMessage()
        for record in caplog.records
        if "Training example" in record.getMessage()
    ]
    assert shown[0].endswith(
        "[CLS] where is my parcel [SEP] + [CLS] the courier says it was left at a neighbour "
        "two days ago [SEP]"
    )


def test_on_a_cpu_batches_of_pairs_run_as_sub_batches_by_the_longer_text(make_data) -> None:
    data = make_data()
    data.setup("fit")
    data.trainer = fake_trainer(CPUAccelerator)
    (train,) = data.splits["train"]
    features = [train[row] for row in range(4)]
    pieces = data.collate(training=True)(features)
    assert isinstance(pieces, list)
    assert len(pieces) > 1
    assert sorted(int(i) for piece in pieces for i in piece[INDEX]) == [
        int(row[INDEX]) for row in features
    ]
    longer = [max(len(row["input_ids"]), len(row[PAIR_INPUT_IDS])) for row in features]
    # Sorted by the longer text of each pair: the first piece holds the shortest pairs.
    widths = [max(p["input_ids"].shape[1], p[PAIR_INPUT_IDS].shape[1]) for p in pieces]
    assert widths == sorted(widths)
    assert widths[-1] == max(longer)
    # One pass where sub-batches are off.
    data.sub_batches = 1
    assert isinstance(data.collate(training=True)(features), dict)
