from pathlib import Path

import pytest
import torch
from transformers import AutoConfig, AutoModelForSequenceClassification, PreTrainedModel

from seqcls.errors import ConfigurationError
from seqcls.model.classifier import SequenceClassifier
from seqcls.model.first_token import (
    compute_last_layer_for_first_token,
    cuts_last_layer,
    resolve_first_token_only,
    supports_first_token_only,
)

# The architectures whose last layer the cut fits: each one's head reads position 0 alone.
CUT_MODEL_TYPES = [
    "bert",
    "camembert",
    "data2vec-text",
    "deberta",
    "deberta-v2",
    "electra",
    "ernie",
    "megatron-bert",
    "rembert",
    "roberta",
    "roberta-prelayernorm",
    "xlm-roberta",
    "xlm-roberta-xl",
]
TINY = {
    "vocab_size": 100,
    "hidden_size": 32,
    "num_hidden_layers": 2,
    "num_attention_heads": 4,
    "intermediate_size": 64,
    "max_position_embeddings": 64,
    "num_labels": 3,
    "pad_token_id": 0,
    "bos_token_id": 1,
    "eos_token_id": 2,
}


def tiny_model(model_type: str) -> PreTrainedModel:
    torch.manual_seed(0)
    config = AutoConfig.for_model(model_type, **TINY)
    return AutoModelForSequenceClassification.from_config(config).eval()


def batch() -> dict[str, torch.Tensor]:
    generator = torch.Generator().manual_seed(1)
    input_ids = torch.randint(5, 90, (3, 12), generator=generator)
    attention_mask = torch.ones_like(input_ids)
    attention_mask[1, 7:] = 0  # a padded row: the first token must still see only real ones
    return {"input_ids": input_ids, "attention_mask": attention_mask}


def loss_and_gradients(model: PreTrainedModel) -> tuple[torch.Tensor, dict[str, torch.Tensor]]:
    model.zero_grad()
    output = model(**batch(), labels=torch.tensor([0, 2, 1]))
    output.loss.backward()
    gradients = {n: p.grad.clone() for n, p in model.named_parameters() if p.grad is not None}
    return output.logits.detach(), gradients


@pytest.mark.parametrize("model_type", CUT_MODEL_TYPES)
def test_first_token_only_keeps_logits_and_every_gradient(model_type: str) -> None:
    model = tiny_model(model_type)  # eval mode: no dropout, so both passes are comparable
    assert supports_first_token_only(model)
    logits, gradients = loss_and_gradients(model)

    compute_last_layer_for_first_token(model)
    feed_forward_rows: list[int] = []
    last_layer = next(m for n, m in model.named_modules() if n.endswith("encoder")).layer[-1]
    last_layer.output.register_forward_hook(
        lambda module, args, output: feed_forward_rows.append(output.shape[1])
    )
    pruned_logits, pruned_gradients = loss_and_gradients(model)

    assert feed_forward_rows == [1]  # the feed-forward block ran on the first token alone
    torch.testing.assert_close(pruned_logits, logits)
    assert pruned_gradients.keys() == gradients.keys()
    for name, gradient in gradients.items():
        torch.testing.assert_close(pruned_gradients[name], gradient, msg=name)


def test_applying_twice_cuts_once() -> None:
    model = tiny_model("bert")
    logits, _ = loss_and_gradients(model)
    compute_last_layer_for_first_token(model)
    compute_last_layer_for_first_token(model)
    torch.testing.assert_close(loss_and_gradients(model)[0], logits)


def test_a_head_that_reads_more_than_the_first_token_is_left_whole() -> None:
    """Laid out as BERT's, but its pooler reads every token's mean: the check on random rows
    finds that the cut changes the logits, so the model computes every token."""
    model = tiny_model("bert")
    pooler = model.bert.pooler
    pooler.forward = lambda hidden: pooler.activation(pooler.dense(hidden.mean(dim=1)))
    assert not supports_first_token_only(model)
    assert resolve_first_token_only(model, None) is False
    with pytest.raises(ConfigurationError, match=r"last_layer_first_token_only true: this bert"):
        resolve_first_token_only(model, True)


@pytest.mark.parametrize("model_type", ["distilbert", "albert", "mpnet", "gpt2", "llama"])
def test_other_architectures_are_left_whole(model_type: str) -> None:
    model = tiny_model(model_type)
    assert not supports_first_token_only(model)
    assert resolve_first_token_only(model, None) is False
    assert resolve_first_token_only(model, False) is False
    with pytest.raises(ConfigurationError, match=r"--model\.last_layer_first_token_only true"):
        resolve_first_token_only(model, True)
    with pytest.raises(ConfigurationError, match=model_type):
        compute_last_layer_for_first_token(model)


@pytest.mark.parametrize(("requested", "expected"), [(None, 1), (True, 1), (False, 0)])
def test_sequence_classifier_cuts_by_default(
    tiny_bert: Path, requested: bool | None, expected: int
) -> None:
    module = SequenceClassifier(
        str(tiny_bert), label_names=["a", "b"], last_layer_first_token_only=requested
    )
    cut = cuts_last_layer(module.model)
    assert int(cut) == expected
