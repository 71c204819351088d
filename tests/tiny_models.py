"""Tiny, offline, random-weight BERT and RoBERTa checkpoints for tests.

Each builder trains a small tokenizer in memory with the ``tokenizers`` library, wraps it in the
matching ``transformers`` fast tokenizer, creates a randomly initialised base encoder (no
classification head, so ``AutoModelForSequenceClassification`` adds a fresh one, as it would for a
real pretrained checkpoint) and writes both to a directory with ``save_pretrained``. The result
can be loaded with ``AutoTokenizer.from_pretrained`` / ``AutoModel*.from_pretrained`` without any
network access. Builds are deterministic: the same corpus, ``max_length`` and ``seed`` give the
same vocabulary and the same weights.
"""

from __future__ import annotations

import shutil
from collections.abc import Callable, Iterable, Iterator
from pathlib import Path
from typing import TypeVar

import torch
from tokenizers import (
    AddedToken,
    Tokenizer,
    decoders,
    models,
    normalizers,
    pre_tokenizers,
    processors,
    trainers,
)
from transformers import (
    AutoModelForSequenceClassification,
    BertConfig,
    BertModel,
    BertTokenizerFast,
    RobertaConfig,
    RobertaModel,
    RobertaTokenizerFast,
)

__all__ = [
    "BERT_SPECIAL_TOKENS",
    "DEFAULT_CORPUS",
    "ROBERTA_SPECIAL_TOKENS",
    "as_sentence_encoder",
    "build_tiny_bert",
    "build_tiny_roberta",
    "stored_in",
]

DEFAULT_CORPUS: tuple[str, ...] = (
    "My order arrived two days late and the box was damaged.",
    "Can you help me reset the password for my account?",
    "The delivery driver left the parcel at the wrong address.",
    "I was charged twice for the same subscription this month.",
    "Please cancel my plan before the next billing cycle starts.",
    "The mobile app crashes every time I open the settings page.",
    "How do I update the email address linked to my profile?",
    "Thanks for the quick reply, the refund showed up this morning!",
    "Tracking says the package is still waiting at the warehouse.",
    "Is express shipping available for orders sent overseas?",
    "My invoice lists an item that I never ordered.",
    "The new update made the app much faster on my old phone.",
    "I can't log in because the verification code never arrives.",
    "Could you change the shipping method to next-day delivery?",
    "Your support team solved my problem in under ten minutes.",
    "The checkout page keeps rejecting my credit card.",
    "Why does my bank statement show a pending payment of $49.99?",
    "I would like to close my account and delete all my data.",
    "The notifications stopped working after I changed phones.",
    "It has been raining all week, so the match was postponed.",
    "Tomorrow will be sunny with a light breeze from the west.",
    "A storm warning was issued for the coast tonight.",
    "The home team won the final 3-1 after extra time.",
    "She ran the marathon in just under four hours.",
    "Our tennis club opens two new courts next spring.",
    "The goalkeeper made an amazing save in the last minute.",
    "Snow is expected in the mountains over the weekend.",
    "The forecast was wrong again; I got soaked on my way home.",
    "He scored twice and was named player of the match.",
    "The cycling race was cancelled because of the heat.",
    "I love how simple the new dashboard looks.",
    "This is the worst customer service I have ever had.",
    "The product works fine, but the manual is confusing.",
    "Where can I download a copy of last year's receipts?",
    "Two-factor authentication is now enabled on my account.",
    "The battery drains quickly when the app runs in the background.",
    "We returned the jacket, but the store says it never arrived.",
    "Please send a replacement; the screen was cracked on arrival.",
    "My premium membership renews automatically every January.",
    "What time does the stadium open on game days?",
    "The courier called to say the van broke down.",
    "I'm happy with the price, but shipping costs are too high.",
    "The weather app shows the wrong temperature for my city.",
    "Our basketball coach wants an extra practice on Friday.",
    "Can I pay with a gift card and a debit card together?",
    "The chat window freezes whenever I attach a screenshot.",
)
"""Short, varied English sentences used to train the tokenizers when no corpus is given."""

BERT_SPECIAL_TOKENS: tuple[str, ...] = ("[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]")
"""BERT special tokens, in id order (``[PAD]`` is id 0)."""

ROBERTA_SPECIAL_TOKENS: tuple[str, ...] = ("<s>", "<pad>", "</s>", "<unk>", "<mask>")
"""RoBERTa special tokens, in id order (``<s>`` is 0, ``<pad>`` is 1, as in ``roberta-base``)."""

_VOCAB_SIZE = 1000
_HIDDEN_SIZE = 32
_NUM_LAYERS = 2
_NUM_HEADS = 2
_INTERMEDIATE_SIZE = 37

_M = TypeVar("_M", bound=torch.nn.Module)


def _corpus_list(corpus: Iterable[str] | None) -> list[str]:
    texts = list(DEFAULT_CORPUS if corpus is None else corpus)
    if not texts:
        raise ValueError("corpus must contain at least one text")
    if not all(isinstance(text, str) for text in texts):
        raise TypeError("corpus must be an iterable of str")
    return texts


def _check_max_length(max_length: int) -> None:
    if max_length < 4:
        raise ValueError(f"max_length must be at least 4, got {max_length}")


def _seeded_init(seed: int, build: Callable[[], _M]) -> _M:
    """Call ``build()`` with torch seeded, leaving the global RNG state untouched."""
    with torch.random.fork_rng(devices=[]):
        torch.manual_seed(seed)
        model = build()
    return model.eval()


def _bert_normalizer() -> normalizers.Normalizer:
    return normalizers.BertNormalizer(
        clean_text=True, handle_chinese_chars=True, strip_accents=None, lowercase=True
    )


def _bert_pipeline(backend: Tokenizer) -> Tokenizer:
    """Attach BERT's lower-casing normaliser, whitespace/punctuation splitter and decoder."""
    backend.normalizer = _bert_normalizer()
    backend.pre_tokenizer = pre_tokenizers.BertPreTokenizer()
    backend.decoder = decoders.WordPiece(prefix="##")
    return backend


def _bert_words(texts: Iterable[str]) -> Iterator[str]:
    """Yield the words a BERT tokenizer trains on: the normalised, pre-tokenised ``texts``."""
    normalizer = _bert_normalizer()
    pre_tokenizer = pre_tokenizers.BertPreTokenizer()
    for text in texts:
        for word, _ in pre_tokenizer.pre_tokenize_str(normalizer.normalize_str(text)):
            yield word


def train_wordpiece(texts: list[str]) -> Tokenizer:
    """A BERT-style WordPiece tokenizer trained on ``texts``: lower-casing, ``[CLS] A [SEP]``
    (``[CLS] A [SEP] B [SEP]`` for pairs), its special tokens ``BERT_SPECIAL_TOKENS``."""
    cls, sep, unk = BERT_SPECIAL_TOKENS[2], BERT_SPECIAL_TOKENS[3], BERT_SPECIAL_TOKENS[1]
    backend = _bert_pipeline(Tokenizer(models.WordPiece(unk_token=unk)))
    # The WordPiece trainer creates the "##x" continuation tokens in hash-map order, and their ids
    # break ties between equally frequent merges, so the learned vocabulary can differ from one
    # run to the next (huggingface/tokenizers#1794). Registering every continuation token up
    # front, sorted, fixes their ids and makes training deterministic. They are passed as trainer
    # special tokens only for that purpose, so the final tokenizer is rebuilt from the learned
    # vocabulary without them.
    continuation = sorted({f"##{char}" for word in _bert_words(texts) for char in word[1:]})
    trainer = trainers.WordPieceTrainer(
        vocab_size=_VOCAB_SIZE,
        min_frequency=1,
        special_tokens=[*BERT_SPECIAL_TOKENS, *continuation],
        continuing_subword_prefix="##",
        show_progress=False,
    )
    backend.train_from_iterator(texts, trainer=trainer)
    vocab = backend.get_vocab(with_added_tokens=False)
    backend = _bert_pipeline(
        Tokenizer(models.WordPiece(vocab=vocab, unk_token=unk, continuing_subword_prefix="##"))
    )
    cls_id, sep_id = backend.token_to_id(cls), backend.token_to_id(sep)
    backend.post_processor = processors.TemplateProcessing(
        single=f"{cls}:0 $A:0 {sep}:0",
        pair=f"{cls}:0 $A:0 {sep}:0 $B:1 {sep}:1",
        special_tokens=[(cls, cls_id), (sep, sep_id)],
    )
    return backend


def build_tiny_bert(
    out_dir: Path,
    *,
    corpus: Iterable[str] | None = None,
    max_length: int = 64,
    seed: int = 0,
) -> Path:
    """Write a tiny random ``BertModel`` and its WordPiece fast tokenizer to ``out_dir``."""
    _check_max_length(max_length)
    out_dir = Path(out_dir)
    texts = _corpus_list(corpus)
    pad, unk, cls, sep, mask = BERT_SPECIAL_TOKENS

    backend = train_wordpiece(texts)

    tokenizer = BertTokenizerFast(
        tokenizer_object=backend,
        do_lower_case=True,
        unk_token=unk,
        sep_token=sep,
        pad_token=pad,
        cls_token=cls,
        mask_token=mask,
        model_max_length=max_length,
    )

    config = BertConfig(
        vocab_size=len(tokenizer),
        hidden_size=_HIDDEN_SIZE,
        num_hidden_layers=_NUM_LAYERS,
        num_attention_heads=_NUM_HEADS,
        intermediate_size=_INTERMEDIATE_SIZE,
        max_position_embeddings=max_length,
        type_vocab_size=2,
        pad_token_id=tokenizer.pad_token_id,
    )
    model = _seeded_init(seed, lambda: BertModel(config))

    out_dir.mkdir(parents=True, exist_ok=True)
    model.save_pretrained(out_dir)
    tokenizer.save_pretrained(out_dir)
    return out_dir


def train_byte_level_bpe(
    texts: list[str], special_tokens: Iterable[str], *, mask: str | None = None
) -> Tokenizer:
    """A byte-level BPE tokenizer (GPT-2's and RoBERTa's kind) trained on ``texts``, with
    ``special_tokens`` first in id order; ``mask``, as in roberta-base, absorbs the space before
    it. It adds no special token around a text: set a post-processor for that."""
    backend = Tokenizer(models.BPE(continuing_subword_prefix="", end_of_word_suffix=""))
    backend.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False)
    backend.decoder = decoders.ByteLevel()
    trainer = trainers.BpeTrainer(
        vocab_size=_VOCAB_SIZE,
        min_frequency=1,
        # As in roberta-base, "<mask>" absorbs the space before it.
        special_tokens=[
            AddedToken(token, lstrip=token == mask, special=True) for token in special_tokens
        ],
        initial_alphabet=pre_tokenizers.ByteLevel.alphabet(),
        show_progress=False,
    )
    # No continuation prefix here: every initial token comes from the sorted byte alphabet, so
    # training is deterministic as it is.
    backend.train_from_iterator(texts, trainer=trainer)
    return backend


def train_roberta_backend(texts: list[str]) -> Tokenizer:
    """A byte-level BPE trained on ``texts`` with RoBERTa's specials and its ``<s> A </s>``
    template: what every RoBERTa-like tiny tokenizer wraps."""
    bos, _, eos, _, mask = ROBERTA_SPECIAL_TOKENS
    backend = train_byte_level_bpe(texts, ROBERTA_SPECIAL_TOKENS, mask=mask)
    # Positional arguments: the keyword for the CLS pair differs between tokenizers releases.
    backend.post_processor = processors.RobertaProcessing(
        (eos, backend.token_to_id(eos)),
        (bos, backend.token_to_id(bos)),
        True,  # trim_offsets
        False,  # add_prefix_space
    )
    return backend


def build_tiny_roberta(
    out_dir: Path,
    *,
    corpus: Iterable[str] | None = None,
    max_length: int = 64,
    seed: int = 0,
) -> Path:
    """Write a tiny random ``RobertaModel`` and its byte-level BPE fast tokenizer to ``out_dir``."""
    _check_max_length(max_length)
    out_dir = Path(out_dir)
    texts = _corpus_list(corpus)
    bos, pad, eos, unk, mask = ROBERTA_SPECIAL_TOKENS
    backend = train_roberta_backend(texts)
    tokenizer = RobertaTokenizerFast(
        tokenizer_object=backend,
        bos_token=bos,
        eos_token=eos,
        sep_token=eos,
        cls_token=bos,
        unk_token=unk,
        pad_token=pad,
        mask_token=AddedToken(mask, lstrip=True, special=True),
        add_prefix_space=False,
        trim_offsets=True,
        model_max_length=max_length,
    )

    config = RobertaConfig(
        vocab_size=len(tokenizer),
        hidden_size=_HIDDEN_SIZE,
        num_hidden_layers=_NUM_LAYERS,
        num_attention_heads=_NUM_HEADS,
        intermediate_size=_INTERMEDIATE_SIZE,
        max_position_embeddings=max_length + 2,
        type_vocab_size=1,
        pad_token_id=tokenizer.pad_token_id,
        bos_token_id=tokenizer.bos_token_id,
        eos_token_id=tokenizer.eos_token_id,
    )
    # RoBERTa's classification head does not use the pooler, so it is left out of the checkpoint.
    model = _seeded_init(seed, lambda: RobertaModel(config, add_pooling_layer=False))

    out_dir.mkdir(parents=True, exist_ok=True)
    model.save_pretrained(out_dir)
    tokenizer.save_pretrained(out_dir)
    return out_dir


def as_sentence_encoder(model_dir: Path, target: Path) -> Path:
    """``model_dir`` dressed as a sentence-transformers checkpoint that pools by mean (as
    all-MiniLM-L6-v2 is): its files linked into ``target``, with the pooling module's files."""
    for path in model_dir.iterdir():
        (target / path.name).symlink_to(path)
    (target / "modules.json").write_text(
        '[{"idx": 1, "name": "1", "path": "1_Pooling", '
        '"type": "sentence_transformers.models.Pooling"}]'
    )
    (target / "1_Pooling").mkdir()
    (target / "1_Pooling" / "config.json").write_text('{"pooling_mode_mean_tokens": true}')
    return target


def stored_in(dtype: torch.dtype, model_dir: Path, target: Path) -> Path:
    """``model_dir``'s tokenizer and a classifier of its weights saved in ``dtype`` into
    ``target``, as a checkpoint published in half precision is."""
    shutil.copytree(model_dir, target)
    model = AutoModelForSequenceClassification.from_pretrained(model_dir, num_labels=2)
    model.to(dtype).save_pretrained(target)
    return target
