"""The token a batch is padded with, for tokenizers that ship without one.

GPT-2's, Llama's and Mistral's tokenizers have no padding token, and a decoder's
``*ForSequenceClassification`` finds each row's last real token as the last one that is not
``config.pad_token_id``: without one it refuses batches of more than one row. Such a
tokenizer pads with its end-of-sequence token (else its unknown token), which the model's
config takes as its ``pad_token_id`` (``model/pretrained.py``) and ``model/`` saves with both,
so ``transformers.pipeline`` reads the same rows. Rows are padded on the right: a decoder
numbers positions from the first token of the batch row, so left padding would move every
real token's position and change its logits.
"""

from pytorch_lightning.utilities import rank_zero_info
from transformers import PreTrainedTokenizerBase

from seqcls.errors import ConfigurationError

# The tokens a tokenizer without a padding token pads with, best first.
_STAND_INS = (("eos_token", "end-of-sequence"), ("unk_token", "unknown"))


def padding_stand_in(tokenizer: PreTrainedTokenizerBase) -> tuple[str, str] | None:
    """(token, what it is) that pads for ``tokenizer``, which has no padding token; None
    when it has none of the stand-ins either."""
    for attribute, role in _STAND_INS:
        token = getattr(tokenizer, attribute, None)
        if isinstance(token, str) and token:
            return token, role
    return None


def with_padding_token(
    tokenizer: PreTrainedTokenizerBase, name_or_path: str
) -> PreTrainedTokenizerBase:
    """``tokenizer`` (changed in place) padding on the right, with its own padding token or,
    where it has none, its end-of-sequence or unknown token, said in one line."""
    tokenizer.padding_side = "right"
    if tokenizer.pad_token_id is not None:
        return tokenizer
    stand_in = padding_stand_in(tokenizer)
    if stand_in is None:
        raise ConfigurationError(
            f"--model.model_name_or_path {name_or_path}: its tokenizer has no padding, "
            "end-of-sequence or unknown token to pad batches with; add a pad_token to its "
            "tokenizer_config.json"
        )
    token, role = stand_in
    tokenizer.pad_token = token
    rank_zero_info(
        f"The tokenizer has no padding token: rows are padded with its {role} token "
        f"{token!r} (id {tokenizer.pad_token_id}), which the model's config and model/ "
        "record as the padding token"
    )
    return tokenizer
