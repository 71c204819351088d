"""Long documents as windows (--data.window_stride), end to end through the real CLI.

Each document's windows are computed here independently with the tokenizer, and the scores
the CLI writes are checked against the exported model run on them by hand.
"""

import csv
import json
import math
import random
from pathlib import Path

import pytest
import torch
from cli_runs import read_rows
from transformers import AutoModelForSequenceClassification, AutoTokenizer

from seqcls.cli import main
from seqcls.model.calibration import CONFIG_KEY

WORDS = ["card", "charge", "parcel", "courier", "crash", "error", "login", "refund", "late"]
LABELS = ["billing", "shipping"]
MAX_LENGTH, STRIDE, BATCH = 16, 6, 8  # windows of 14 text tokens, 6 apart: 8 shared
EPOCHS = 3


def documents(count: int, seed: int) -> list[dict[str, str]]:
    """Short and long texts (1 to about 8 windows), labelled by which word they repeat."""
    rng = random.Random(seed)
    rows = []
    for row in range(count):
        label = LABELS[row % 2]
        cue = "charge" if label == "billing" else "parcel"
        words = rng.choices(WORDS, k=rng.randint(3, 50)) + [cue] * 3
        rng.shuffle(words)
        rows.append({"text": " ".join(words), "label": label})
    return rows


def write_csv(path: Path, rows: list[dict[str, str]]) -> str:
    with path.open("w", newline="") as stream:
        writer = csv.DictWriter(stream, fieldnames=list(rows[0]))
        writer.writeheader()
        writer.writerows(rows)
    return str(path)


def seqcls(command: str, run_dir: Path, *extra: str) -> None:
    main([
        command,
        *extra,
        "--trainer.default_root_dir", str(run_dir),
        "--trainer.enable_progress_bar", "false",
        "--trainer.enable_model_summary", "false",
    ])  # fmt: skip


@pytest.fixture(scope="module")
def work(tmp_path_factory: pytest.TempPathFactory, tiny_bert: Path) -> Path:
    work = tmp_path_factory.mktemp("windows")
    write_csv(work / "train.csv", documents(40, seed=1))
    write_csv(work / "dev.csv", documents(23, seed=2))  # odd, and more than one batch
    seqcls(
        "fit", work / "run",
        "--model.model_name_or_path", str(tiny_bert),
        "--model.learning_rate", "3e-3",
        "--data.train_file", str(work / "train.csv"),
        "--data.validation_file", str(work / "dev.csv"),
        "--data.max_length", str(MAX_LENGTH),
        "--data.window_stride", str(STRIDE),
        "--data.batch_size", str(BATCH),
        "--data.cache_dir", str(work / "cache"),
        "--trainer.max_epochs", str(EPOCHS),
    )  # fmt: skip
    return work


def windows_of(text: str, tokenizer: AutoTokenizer) -> list[list[int]]:
    """Windows of MAX_LENGTH tokens, their text tokens starting STRIDE apart, built by hand."""
    tokens = tokenizer(text, add_special_tokens=False)["input_ids"]
    size = MAX_LENGTH - 2
    starts = range(0, max(1, len(tokens) - size + STRIDE), STRIDE)
    cls, sep = tokenizer.cls_token_id, tokenizer.sep_token_id
    return [[cls, *tokens[start : start + size], sep] for start in starts]


def scores_by_hand(
    run: Path, texts: list[str], pooling: str, temperature: float = 1.0
) -> list[float]:
    """Each text's class probabilities (flattened), from the weights of ``last.ckpt``."""
    tokenizer = AutoTokenizer.from_pretrained(run / "model")
    model = AutoModelForSequenceClassification.from_pretrained(run / "model").eval()
    state = torch.load(run / "checkpoints" / "last.ckpt", weights_only=True)["state_dict"]
    model.load_state_dict({key.removeprefix("model."): value for key, value in state.items()})
    scores: list[float] = []
    for text in texts:
        with torch.no_grad():
            logits = torch.cat(
                [model(torch.tensor([window])).logits for window in windows_of(text, tokenizer)]
            )
        pooled = logits.mean(0) if pooling == "mean" else logits.max(0).values
        scores += (pooled / temperature).softmax(-1).tolist()
    return scores


def test_training_sees_every_window(work: Path) -> None:
    tokenizer = AutoTokenizer.from_pretrained(work / "run" / "model")
    texts = [row["text"] for row in read_rows(work / "train.csv")]
    counts = [len(windows_of(text, tokenizer)) for text in texts]
    assert min(counts) <= 2  # short documents
    assert max(counts) >= 6  # and long ones
    # Without a validation set the held-out share would change the count: there is one.
    last = torch.load(work / "run" / "checkpoints" / "last.ckpt", weights_only=True)
    assert last["global_step"] == EPOCHS * math.ceil(sum(counts) / BATCH)
    assert last["hyper_parameters"]["window_pooling"] == "mean"
    assert "window_stride: 6" in (work / "run" / "config.yaml").read_text()


@pytest.mark.parametrize("pooling", ["mean", "max"])
def test_predict_scores_each_document_from_all_its_windows_in_input_order(
    work: Path, pooling: str
) -> None:
    out = work / f"predict-{pooling}"
    seqcls(
        "predict", out,
        "--config", str(work / "run" / "config.yaml"),
        "--ckpt_path", str(work / "run" / "checkpoints" / "last.ckpt"),
        "--data.predict_file", str(work / "dev.csv"),
        "--data.eval_batch_size", "3",
        "--data.window_pooling", pooling,
    )  # fmt: skip
    rows = read_rows(out / "predictions.csv")
    texts = [row["text"] for row in read_rows(work / "dev.csv")]
    assert [row["index"] for row in rows] == [str(i) for i in range(len(texts))]
    written = [float(row[f"score_{name}"]) for row in rows for name in LABELS]
    # predict divides the pooled logits by the temperature fitted after fit.
    calibration = json.loads((work / "run" / "model" / "config.json").read_text())[CONFIG_KEY]
    by_hand = scores_by_hand(work / "run", texts, pooling, calibration["temperature"])
    assert written == pytest.approx(by_hand, abs=2e-6)


def test_validation_metrics_count_each_document_once(work: Path) -> None:
    out = work / "validate"
    seqcls(
        "validate", out,
        "--config", str(work / "run" / "config.yaml"),
        "--ckpt_path", str(work / "run" / "checkpoints" / "last.ckpt"),
        "--data.eval_batch_size", "5",
    )  # fmt: skip
    measured = json.loads((out / "metrics.json").read_text())["validation"]
    gold = [row["label"] for row in read_rows(work / "dev.csv")]
    flat = scores_by_hand(
        work / "run", [row["text"] for row in read_rows(work / "dev.csv")], "mean"
    )
    scores = [flat[row : row + 2] for row in range(0, len(flat), 2)]
    predicted = [LABELS[0] if s[0] >= s[1] else LABELS[1] for s in scores]
    accuracy = sum(p == g for p, g in zip(predicted, gold, strict=True)) / len(gold)
    assert 0 < accuracy < 1  # else a wrong count of documents could still match
    assert measured["accuracy"] == pytest.approx(accuracy, abs=1e-6)
    # The loss of each document's pooled logits, averaged over documents.
    losses = [-math.log(s[LABELS.index(g)]) for s, g in zip(scores, gold, strict=True)]
    assert measured["loss"] == pytest.approx(sum(losses) / len(losses), abs=1e-4)
    # The fit's last validation scored the same weights the same way.
    fitted = json.loads((work / "run" / "metrics.json").read_text())
    if fitted["best"]["epoch"] == EPOCHS - 1:
        for name in ("accuracy", "macro_f1", "loss"):
            assert fitted["validation"][name] == pytest.approx(measured[name], abs=1e-6)


@pytest.mark.parametrize(
    ("extra", "message"),
    [
        (["--data.window_stride", "0"], "--data.window_stride 0: give the tokens between"),
        (["--data.window_stride", "16"], "--data.window_stride 16: give the tokens between"),
        (["--data.window_stride", "15"], "a window holds 14 text tokens"),
        (["--data.window_pooling", "max"], "--data.window_pooling max needs --data.window_stride"),
        (
            ["--data.window_stride", "8", "--data.text_pair_column", "text"],
            "--data.window_stride cannot split text pairs",
        ),
    ],
)
def test_bad_window_options_are_one_line_errors(
    tmp_path: Path,
    tiny_bert: Path,
    capsys: pytest.CaptureFixture[str],
    extra: list[str],
    message: str,
) -> None:
    train = write_csv(tmp_path / "train.csv", documents(6, seed=3))
    with pytest.raises(SystemExit) as done:
        seqcls(
            "fit", tmp_path / "run",
            "--model.model_name_or_path", str(tiny_bert),
            "--data.train_file", train,
            "--data.max_length", str(MAX_LENGTH),
            "--data.cache_dir", str(tmp_path / "cache"),
            *extra,
        )  # fmt: skip
    assert done.value.code == 2
    line = capsys.readouterr().err.strip().splitlines()[-1]
    assert line.startswith("seqcls: error: ")
    assert message in line
    assert not (tmp_path / "run" / "checkpoints").exists()


def test_windows_on_a_hub_dataset_without_the_text_column_is_a_one_line_error(
    tmp_path: Path, tiny_bert: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    # A local folder stands in for a hub repository: load_dataset() reads both the same way.
    hub = tmp_path / "hub-dataset"
    hub.mkdir()
    rows = [{"review": row["text"], "label": row["label"]} for row in documents(6, seed=4)]
    write_csv(hub / "train.csv", rows)
    with pytest.raises(SystemExit) as done:
        seqcls(
            "fit", tmp_path / "run",
            "--model.model_name_or_path", str(tiny_bert),
            "--data.dataset_name", str(hub),
            "--data.validation_split", "null",
            "--data.label_names", "[billing, shipping]",
            "--data.problem_type", "single_label_classification",
            "--data.window_stride", "8",
            "--data.max_length", str(MAX_LENGTH),
            "--data.cache_dir", str(tmp_path / "cache"),
        )  # fmt: skip
    assert done.value.code == 2
    line = capsys.readouterr().err.strip().splitlines()[-1]
    assert line.startswith("seqcls: error: ")
    assert "missing column 'text' (--data.text_column)" in line
    assert "'review'" in line  # names the columns there are


def test_serving_reads_documents_by_the_windows_of_the_fit(work: Path) -> None:
    """model/config.json records the fit's windows, and seqcls serve scores by them."""
    from seqcls.data.reading import Reading
    from seqcls.serve.backends import TorchBackend
    from seqcls.serve.model_files import read_model_files
    from seqcls.serve.predictions import Predictor

    files = read_model_files(str(work / "run" / "model"))
    assert files.reading == Reading(MAX_LENGTH, STRIDE, "mean")
    texts = [row["text"] for row in read_rows(work / "dev.csv")]
    answers = Predictor(files, TorchBackend(files.folder)).predict([(t, None) for t in texts])
    tokenizer = AutoTokenizer.from_pretrained(files.folder)
    model = AutoModelForSequenceClassification.from_pretrained(files.folder).eval()
    for text, answer in zip(texts, answers, strict=True):
        with torch.no_grad():
            windows = [model(torch.tensor([w])).logits for w in windows_of(text, tokenizer)]
        expected = (torch.cat(windows).mean(0) / files.temperature).softmax(-1)
        assert [answer["scores"][name] for name in LABELS] == pytest.approx(
            expected.tolist(), abs=1e-5
        )
