"""The recipe's options: layer-wise learning rates, reinitialised layers, class weights."""

import re
from pathlib import Path
from types import SimpleNamespace

import pytest
import pytorch_lightning as pl
import torch
from pytorch_lightning.accelerators import CPUAccelerator
from sample_data import sample_data as shared_sample_data
from torch.nn import functional
from transformers import AutoModelForSequenceClassification

from seqcls.data.classification import TextClassificationDataModule
from seqcls.data.columns import LABELS as LABELS_KEY
from seqcls.errors import ConfigurationError
from seqcls.model.classifier import SequenceClassifier
from seqcls.model.layers import encoder_layers, reinitialise_top_layers
from seqcls.model.loss import balanced_weights, cross_entropy_sum
from seqcls.model.optimization import layerwise_groups

REPO = Path(__file__).resolve().parents[2]
LABELS = ["account", "billing", "shipping", "technical"]
LAYER = re.compile(r"\.layer\.(\d+)\.")


def sample_data(tokenizer: Path, cache: Path, **overrides: object) -> TextClassificationDataModule:
    arguments: dict[str, object] = {"batch_size": 8, "max_train_samples": 32, **overrides}
    return shared_sample_data(tokenizer, cache, **arguments)


def quick_trainer(tmp_path: Path, max_steps: int) -> pl.Trainer:
    return pl.Trainer(
        accelerator="cpu",
        max_steps=max_steps,
        limit_val_batches=0,
        logger=False,
        enable_checkpointing=False,
        enable_progress_bar=False,
        enable_model_summary=False,
        default_root_dir=str(tmp_path),
    )


def expected_rate(
    name: str, layers: int, lr: float, decay: float, head: float, fresh: int = 0
) -> float:
    """What each parameter should train at, read from its name (BERT and RoBERTa alike): the
    top ``fresh`` layers and the pooler above them, drawn afresh, train with the head."""
    if name.startswith("classifier."):
        return head
    if match := LAYER.search(name):
        depth = int(match.group(1)) + 1
        return head if depth > layers - fresh else lr * decay ** (layers - depth)
    if ".embeddings." in name:
        return lr * decay**layers
    assert ".pooler." in name, name
    return head if fresh else lr


@pytest.mark.parametrize("fresh", [0, 1, 2])
@pytest.mark.parametrize("fixture", ["tiny_bert", "tiny_roberta"])
def test_layerwise_rates_fall_by_the_decay_per_layer(
    fixture: str, fresh: int, request: pytest.FixtureRequest
) -> None:
    checkpoint = request.getfixturevalue(fixture)
    model = AutoModelForSequenceClassification.from_pretrained(checkpoint, num_labels=3)
    groups = layerwise_groups(
        model, 1e-3, 0.01, layer_lr_decay=0.5, head_learning_rate=5e-3, fresh_layers=fresh
    )
    layers = len(encoder_layers(model))
    assert layers >= 2
    rate = {id(p): group["lr"] for group in groups for p in group["params"]}
    named = dict(model.named_parameters())
    assert len(rate) == len(named)  # every parameter in exactly one group
    for name, parameter in named.items():
        expected = expected_rate(name, layers, 1e-3, 0.5, 5e-3, fresh)
        assert rate[id(parameter)] == pytest.approx(expected), name
    # Weight decay still skips biases and norms inside each depth.
    for group in groups:
        assert group["weight_decay"] == (0.01 if group["params"][0].ndim >= 2 else 0.0)


def test_the_optimizer_trains_with_the_layerwise_rates(tiny_bert: Path, tmp_path: Path) -> None:
    model = SequenceClassifier(
        str(tiny_bert),
        label_names=LABELS,
        learning_rate=1e-3,
        layer_lr_decay=0.5,
        head_learning_rate=4e-3,
        adam_betas=(0.9, 0.98),
        adam_epsilon=1e-6,
    )
    assert model.hparams["reinit_layers"] == 1  # unset: the top layer drawn afresh
    trainer = quick_trainer(tmp_path, max_steps=1)
    trainer.fit(model, datamodule=sample_data(tiny_bert, tmp_path / "cache"))
    groups = trainer.optimizers[0].param_groups
    peaks = sorted({group["initial_lr"] for group in groups})
    layers = len(encoder_layers(model.model))
    # The top layer trains with the head; each layer below, and the embeddings, at half the
    # rate of the one above.
    assert peaks == pytest.approx(sorted({1e-3 * 0.5**k for k in range(1, layers + 1)} | {4e-3}))
    assert {group["betas"] for group in groups} == {(0.9, 0.98)}
    assert {group["eps"] for group in groups} == {1e-6}


@pytest.mark.parametrize(
    ("problem_type", "given", "peak"),
    [
        ("single_label_classification", None, 5e-5),
        ("multi_label_classification", None, 5e-5),
        ("regression", None, 1e-4),
        ("regression", 3e-5, 3e-5),
    ],
)
def test_an_unset_learning_rate_follows_the_problem_type(
    problem_type: str, given: float | None, peak: float, tiny_bert: Path
) -> None:
    labels = ["score"] if problem_type == "regression" else LABELS
    model = SequenceClassifier(
        str(tiny_bert), label_names=labels, problem_type=problem_type, learning_rate=given
    )
    assert model.learning_rate == peak
    assert model.hparams["learning_rate"] == peak  # the checkpoint and model card say it


def peak_rates(model: SequenceClassifier, tmp_path: Path, tokenizer: Path) -> dict[str, float]:
    """Each parameter's peak learning rate, by name, after one step of fit."""
    trainer = quick_trainer(tmp_path, max_steps=1)
    trainer.fit(model, datamodule=sample_data(tokenizer, tmp_path / "cache"))
    rate = {id(p): g["initial_lr"] for g in trainer.optimizers[0].param_groups for p in g["params"]}
    return {name: rate[id(p)] for name, p in model.model.named_parameters()}


@pytest.mark.parametrize(
    ("given", "reinit", "expected_head"),
    [
        pytest.param(None, None, 1e-4, id="unset: the top layer afresh, with the head at 2x"),
        pytest.param(None, 0, 5e-5, id="every layer pretrained: one rate"),
        pytest.param(3e-4, None, 3e-4, id="a head rate given"),
    ],
)
def test_what_starts_untrained_peaks_at_the_head_rate(
    given: float | None,
    reinit: int | None,
    expected_head: float,
    tiny_bert: Path,
    tmp_path: Path,
) -> None:
    model = SequenceClassifier(
        str(tiny_bert), label_names=LABELS, head_learning_rate=given, reinit_layers=reinit
    )
    assert model.hparams["head_learning_rate"] == (None if expected_head == 5e-5 else expected_head)
    layers = len(encoder_layers(model.model))
    fresh = model.hparams["reinit_layers"]
    rates = peak_rates(model, tmp_path, tiny_bert)
    for name, rate in rates.items():
        assert rate == pytest.approx(expected_rate(name, layers, 5e-5, 1.0, expected_head, fresh))
    assert {rates[n] for n in rates if n.startswith("classifier.")} == {expected_head}


@pytest.mark.parametrize("fixture", ["tiny_bert", "tiny_roberta"])
def test_reinit_changes_exactly_the_top_layers(
    fixture: str, request: pytest.FixtureRequest
) -> None:
    checkpoint = request.getfixturevalue(fixture)
    model = AutoModelForSequenceClassification.from_pretrained(checkpoint, num_labels=3)
    before = {name: p.detach().clone() for name, p in model.named_parameters()}
    layers = len(encoder_layers(model))
    torch.manual_seed(0)
    reinitialise_top_layers(model, 1)
    changed = {name for name, p in model.named_parameters() if not torch.equal(p, before[name])}
    top = f".layer.{layers - 1}."
    # Every weight matrix of the top layer (and of a pooler) is drawn afresh; nothing below is.
    fresh = {
        name for name, p in before.items() if (top in name or ".pooler." in name) and p.ndim == 2
    }
    assert fresh
    assert fresh <= changed
    assert all(top in name or ".pooler." in name for name in changed), changed
    with pytest.raises(ConfigurationError, match=r"--model\.reinit_layers 99: .* give 0 to"):
        reinitialise_top_layers(model, 99)


def test_balanced_weights_count_each_label_alike() -> None:
    weights = balanced_weights([3, 1, 0])
    # 4 rows, 3 labels: 4 / (3 * 3), 4 / (3 * 1), and 1 for a label no row has.
    assert weights.tolist() == pytest.approx([4 / 9, 4 / 3, 1.0])


def test_weighted_loss_matches_the_hand_computed_one() -> None:
    logits = torch.tensor([[2.0, 0.0], [0.0, 1.0], [1.0, 1.0]])
    labels = torch.tensor([0, 1, 1])
    weight = torch.tensor([1.0, 3.0])
    total, divisor = cross_entropy_sum(logits, labels, weight, 0.0)
    log_p = logits.log_softmax(-1)
    by_hand = -(1 * log_p[0, 0] + 3 * log_p[1, 1] + 3 * log_p[2, 1]) / 7
    assert (total / divisor).item() == pytest.approx(by_hand.item())
    plain = cross_entropy_sum(logits, labels, None, 0.0)
    assert (plain[0] / plain[1]).item() != pytest.approx(by_hand.item())


def test_smoothing_and_weights_match_torchs_cross_entropy() -> None:
    torch.manual_seed(0)
    logits, labels = torch.randn(10, 4), torch.randint(0, 4, (10,))
    weight = torch.tensor([0.5, 1.0, 2.0, 4.0])
    for w in (None, weight):
        expected = functional.cross_entropy(logits, labels, weight=w, label_smoothing=0.2)
        # Split into two pieces, as sub-batches split a batch: still the whole batch's mean.
        parts = [
            cross_entropy_sum(logits[s], labels[s], w, 0.2) for s in (slice(0, 3), slice(3, 10))
        ]
        mean = sum(p[0] for p in parts) / sum(p[1] for p in parts)
        assert mean.item() == pytest.approx(expected.item(), rel=1e-6)


def test_training_step_uses_the_weighted_smoothed_loss(
    tiny_bert: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    model = SequenceClassifier(
        str(tiny_bert), label_names=LABELS, class_weights=[1, 2, 3, 4], label_smoothing=0.1
    ).eval()  # no dropout: the same logits twice
    # training_step on its own, outside a Trainer: nothing to log to, not on XLA.
    monkeypatch.setattr(model, "log", lambda *args, **kwargs: None)
    model.trainer = SimpleNamespace(accelerator=CPUAccelerator(), precision="32-true")  # type: ignore[assignment]
    data = sample_data(tiny_bert, tmp_path / "cache", sub_batches=1)
    data.setup("fit")
    batch = next(iter(data.val_dataloader()[0]))
    logits = model(batch).logits
    expected = functional.cross_entropy(
        logits, batch[LABELS_KEY], weight=torch.tensor([1.0, 2, 3, 4]), label_smoothing=0.1
    )
    assert model.training_step(batch, 0).item() == pytest.approx(expected.item(), rel=1e-6)


def test_auto_class_weights_come_from_the_training_labels(tiny_bert: Path, tmp_path: Path) -> None:
    model = SequenceClassifier(str(tiny_bert), label_names=LABELS, class_weights="auto")
    data = sample_data(tiny_bert, tmp_path / "cache")
    quick_trainer(tmp_path, max_steps=1).fit(model, datamodule=data)
    counts = data.train_label_counts()
    assert sum(counts) == 32
    assert len(counts) == 4
    assert model.class_weight is not None
    assert model.class_weight.tolist() == pytest.approx([32 / (4 * c) for c in counts])


@pytest.mark.parametrize(
    ("options", "message"),
    [
        ({"class_weights": [1.0, 2.0]}, r"--model\.class_weights \[1\.0, 2\.0\]: 2 weights for 4"),
        ({"class_weights": [1.0, 0.0, 1.0, 1.0]}, r"give weights above 0"),
        ({"label_smoothing": 1.0}, r"--model\.label_smoothing 1: give a value in \[0, 1\)"),
        (
            {"label_smoothing": 0.1, "problem_type": "regression", "label_names": ["score"]},
            r"--model\.label_smoothing 0\.1: only single-label",
        ),
        ({"rdrop_alpha": -1.0}, r"--model\.rdrop_alpha -1: give a value of at least 0"),
        (
            {"rdrop_alpha": 1.0, "problem_type": "regression", "label_names": ["score"]},
            r"--model\.rdrop_alpha 1\.0: only single-label",
        ),
    ],
)
def test_bad_loss_options_fail_in_one_line(
    tiny_bert: Path, options: dict[str, object], message: str
) -> None:
    arguments: dict[str, object] = {"label_names": LABELS, **options}
    with pytest.raises(ConfigurationError, match=message):
        SequenceClassifier(str(tiny_bert), **arguments)  # type: ignore[arg-type]
