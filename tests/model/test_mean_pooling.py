"""A mean-pooled head: the mean of each row's tokens, packed or not, and where it is chosen."""

import json
from pathlib import Path
from typing import Any

import pytest
import torch
from packed_rows import (
    EXTRA,
    MASK_SERVED,
    SERVED,
    TINY,
    assert_same,
    logits_loss_gradients,
    padded,
    rows,
    tiny_model,
)
from test_packed_forward import classifier
from torch.utils._python_dispatch import TorchDispatchMode
from transformers import PreTrainedModel
from transformers.modeling_outputs import BaseModelOutput

from seqcls.data.packing import pack
from seqcls.errors import ConfigurationError
from seqcls.model.first_token import cuts_last_layer, resolve_first_token_only
from seqcls.model.mean_pooling import (
    _replace_by_means,
    averaging_segments,
    pool_by_mean,
    pools_by_mean,
    resolve_pooling,
    supports_mean_pooling,
    use_pooling,
)
from seqcls.model.packed_forward import PackedForward
from seqcls.sentence_encoder import checkpoint_pooling


def mean_model(model_type: str) -> PreTrainedModel:
    model = tiny_model(model_type, cut=False)
    pool_by_mean(model)
    return model


def features_for(model_type: str) -> list[dict[str, Any]]:
    return rows(token_types="type_vocab_size" in EXTRA.get(model_type, {}))


def reference_logits(model: PreTrainedModel, batch: dict[str, torch.Tensor]) -> torch.Tensor:
    """The head applied by hand to each row's mean of the base model's last hidden state."""
    inputs = {key: value for key, value in batch.items() if key != "labels"}
    with torch.no_grad():
        hidden = model.base_model(**inputs).last_hidden_state
    mask = batch["attention_mask"][..., None].float()
    means = ((hidden * mask).sum(1) / mask.sum(1))[:, None]
    if model.config.model_type == "bert":
        return model.classifier(model.dropout(model.bert.pooler(means)))
    return model.classifier(means)  # RoBERTa's head reads position 0 itself


@pytest.mark.parametrize("model_type", ["bert", "roberta"])
def test_the_head_reads_the_mean_of_each_rows_tokens(model_type: str) -> None:
    features = features_for(model_type)
    batch = padded(features)
    plain = tiny_model(model_type, cut=False)  # the same weights, first-token head
    expected = reference_logits(plain, batch)
    model = mean_model(model_type)
    with torch.no_grad():
        logits = model(**batch).logits
        first_token = plain(**batch).logits
    torch.testing.assert_close(logits, expected, atol=2e-6, rtol=1e-4)
    # Not the first token's head: 50 times the tolerance apart.
    assert (logits - first_token).abs().max() > 1e-4


@pytest.mark.parametrize("model_type", sorted(SERVED))
@pytest.mark.parametrize("row_length", [16, 40])
def test_packed_rows_average_each_segment_alone(model_type: str, row_length: int) -> None:
    model = mean_model(model_type)
    assert not cuts_last_layer(model)  # the head reads every token of the last layer
    forward = PackedForward(model)
    assert forward.route == SERVED[model_type]
    features = features_for(model_type)
    batch = pack(features, row_length, TINY["pad_token_id"])
    assert len(batch["input_ids"]) < len(features)
    packed = logits_loss_gradients(model, lambda: forward(batch))
    unpacked = logits_loss_gradients(model, lambda: model(**padded(features)))
    assert_same(packed, unpacked)


@pytest.mark.parametrize("model_type", MASK_SERVED)
def test_one_model_row_with_attention_by_segments(model_type: str) -> None:
    model = mean_model(model_type)
    forward = PackedForward(model)
    assert forward.use_segments()
    features = features_for(model_type)
    batch = pack(features, 200, TINY["pad_token_id"])
    assert len(batch["input_ids"]) == 1
    packed = logits_loss_gradients(model, lambda: forward(batch))
    unpacked = logits_loss_gradients(model, lambda: model(**padded(features)))
    assert_same(packed, unpacked)


def test_a_repeated_segment_reads_the_mean_once_and_its_repeats_zeros() -> None:
    """Fixed-shape (XLA) batches fill empty slots with model row 0's first segment."""
    segment_ids = torch.tensor([[1, 1, 2, 2, 2, 0], [1, 1, 1, 0, 0, 0]])
    rows_, starts = torch.tensor([0, 0, 1, 0, 0]), torch.tensor([0, 2, 0, 0, 0])
    hidden = torch.arange(12 * 2, dtype=torch.float).reshape(2, 6, 2)
    with averaging_segments(segment_ids, rows_, starts):
        output = _replace_by_means(None, (), BaseModelOutput(last_hidden_state=hidden))
    means = output.last_hidden_state[:, 0]
    expected = torch.stack(
        [hidden[0, 0:2].mean(0), hidden[0, 2:5].mean(0), hidden[1, 0:3].mean(0)]
        + [torch.zeros(2)] * 2
    )
    torch.testing.assert_close(means, expected)


def test_gradient_checkpointing_runs_unpacked_with_the_same_means() -> None:
    model = mean_model("bert")
    model.activation_checkpointing_enable()
    model.train()  # checkpointing recomputes only in training mode; dropout off to compare
    for module in model.modules():
        if isinstance(module, torch.nn.Dropout):
            module.p = 0.0
    forward = PackedForward(model)
    assert not forward.served
    features = features_for("bert")
    batch = pack(features, 40, TINY["pad_token_id"])
    packed = logits_loss_gradients(model, lambda: forward(batch))
    assert_same(packed, logits_loss_gradients(model, lambda: model(**padded(features))))


def sentence_encoder_files(folder: Path, **modes: bool) -> Path:
    folder.mkdir(parents=True, exist_ok=True)
    kinds = ("Transformer", "Pooling")
    paths = ("", "1_Pooling")
    modules = [
        {"idx": i, "name": str(i), "path": path, "type": f"sentence_transformers.models.{kind}"}
        for i, (kind, path) in enumerate(zip(kinds, paths, strict=True))
    ]
    (folder / "modules.json").write_text(json.dumps(modules))
    (folder / "1_Pooling").mkdir(exist_ok=True)
    options = {"word_embedding_dimension": 32, "pooling_mode_cls_token": False}
    options.update({f"pooling_mode_{mode}": value for mode, value in modes.items()})
    (folder / "1_Pooling" / "config.json").write_text(json.dumps(options))
    return folder


def test_the_checkpoints_own_pooling_is_read_off_its_sentence_transformers_files(
    tmp_path: Path,
) -> None:
    assert checkpoint_pooling(sentence_encoder_files(tmp_path / "a", mean_tokens=True)) == "mean"
    assert checkpoint_pooling(sentence_encoder_files(tmp_path / "b", cls_token=True)) == (
        "first_token"
    )
    both = sentence_encoder_files(tmp_path / "c", mean_tokens=True, max_tokens=True)
    assert checkpoint_pooling(both) is None  # max pooling is not served: the model's own head
    assert checkpoint_pooling(tmp_path / "plain") is None
    (tmp_path / "broken").mkdir()
    (tmp_path / "broken" / "modules.json").write_text("[{")
    assert checkpoint_pooling(tmp_path / "broken") is None


def test_auto_follows_the_checkpoint_and_unset_a_fine_tuned_models_config(
    tmp_path: Path,
) -> None:
    model = tiny_model("bert", cut=False)
    encoder = sentence_encoder_files(tmp_path / "encoder", mean_tokens=True)
    assert resolve_pooling(model, str(encoder), "auto") == "mean"
    assert resolve_pooling(model, str(encoder), None) == "first_token"  # not by default
    assert resolve_pooling(model, str(tmp_path / "plain"), "auto") == "first_token"
    assert resolve_pooling(model, str(encoder), "first_token") == "first_token"
    use_pooling(model, "mean")
    model.save_pretrained(tmp_path / "fine-tuned")
    saved = json.loads((tmp_path / "fine-tuned" / "config.json").read_text())
    assert saved["seqcls_pooling"] == "mean"
    # Loaded again (to predict, or to fine-tune further), it keeps the pooling it trained with.
    reloaded = tiny_model("bert", cut=False)
    reloaded.config.seqcls_pooling = saved["seqcls_pooling"]
    for requested in (None, "auto"):
        assert resolve_pooling(reloaded, str(tmp_path / "fine-tuned"), requested) == "mean"
    assert resolve_pooling(reloaded, str(tmp_path / "fine-tuned"), "first_token") == "first_token"


@pytest.mark.parametrize("model_type", ["distilbert", "gpt2"])
def test_unsupported_architectures_and_a_first_token_cut_are_refused(model_type: str) -> None:
    model = tiny_model(model_type, cut=False)
    assert not supports_mean_pooling(model)
    assert resolve_pooling(model, "x", "auto") == "first_token"
    with pytest.raises(ConfigurationError, match=rf"--model\.pooling mean: this {model_type} "):
        resolve_pooling(model, "x", "mean")
    with pytest.raises(ConfigurationError, match=r"--model\.pooling first_token"):
        resolve_first_token_only(tiny_model("bert", cut=False), True, every_token=True)
    assert resolve_first_token_only(tiny_model("bert", cut=False), None, every_token=True) is False


def test_the_classifier_pools_a_sentence_encoder_by_mean(tiny_bert: Path, tmp_path: Path) -> None:
    encoder = tmp_path / "encoder"
    encoder.mkdir()
    for path in tiny_bert.iterdir():
        (encoder / path.name).symlink_to(path)
    sentence_encoder_files(encoder, mean_tokens=True)
    module = classifier(encoder, tmp_path, pooling="auto")
    assert pools_by_mean(module.model)
    assert not cuts_last_layer(module.model)
    assert module.packed_forward.served
    assert module.model.config.seqcls_pooling == "mean"
    by_default = classifier(encoder, tmp_path)
    assert not pools_by_mean(by_default.model)
    assert cuts_last_layer(by_default.model)
    assert by_default.model.config.seqcls_pooling == "first_token"


def test_bf16_activations_are_summed_in_fp32() -> None:
    """A CUDA index_add in bf16 adds in bf16 (a CPU one happens not to): the sums the means
    come from run in fp32 whatever the activations' precision, and the means go back."""
    summed: list[torch.dtype] = []

    class Record(TorchDispatchMode):
        def __torch_dispatch__(self, func: Any, types: Any, args: Any = (), kwargs: Any = None):
            if func.overloadpacket == torch.ops.aten.index_add:
                summed.append(args[0].dtype)
            return func(*args, **(kwargs or {}))

    segment_ids = torch.ones(1, 8, dtype=torch.long)
    hidden = torch.randn(1, 8, 4).to(torch.bfloat16)
    with Record(), averaging_segments(segment_ids, torch.tensor([0]), torch.tensor([0])):
        output = _replace_by_means(None, (), BaseModelOutput(last_hidden_state=hidden))
    assert summed == [torch.float32, torch.float32]  # the sums, and the token counts
    assert output.last_hidden_state.dtype == torch.bfloat16
    expected = hidden.double().mean(dim=1, keepdim=True).to(torch.bfloat16)
    torch.testing.assert_close(output.last_hidden_state, expected)
