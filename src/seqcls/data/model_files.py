"""What the model that ``--model.model_name_or_path`` names tells the data: its tokenizer,
and the labels and pair encoding its ``config.json`` records (a model seqcls fine-tuned)."""

import json
import os
from pathlib import Path

from transformers import AutoTokenizer, PreTrainedTokenizerBase

from seqcls.cloud.storage import default_cache_dir, exists, local_model_dir
from seqcls.data.labels import LabelSpace, label_space_of_model
from seqcls.data.pair_batches import MODEL_CONFIG_KEY, PairEncoding
from seqcls.errors import ConfigurationError, names_a_local_path, unloadable


def load_tokenizer(name_or_path: str | None) -> PreTrainedTokenizerBase:
    """The tokenizer of a hub id, or of a local or remote model directory."""
    if not name_or_path:
        raise ConfigurationError("no tokenizer: set --model.model_name_or_path")
    try:
        return AutoTokenizer.from_pretrained(local_model_dir(name_or_path, default_cache_dir()))
    except (OSError, ValueError) as error:
        raise unloadable("--data.tokenizer_name_or_path", name_or_path, error) from None


def model_label_space(name_or_path: str | None) -> LabelSpace:
    """The labels of the model ``--model.model_name_or_path`` names, for a run given no training
    rows: a model fine-tuned by seqcls (or the HF Trainer) records them in its config.json."""
    text = _model_config(name_or_path) if name_or_path else None
    space = label_space_of_model(json.loads(text)) if text else None
    if space is None:
        raise ConfigurationError(
            "no train data: pass --data.train_file, or give --model.model_name_or_path a "
            f"fine-tuned model, whose config.json names its labels ({name_or_path} names none"
            f"{_what_it_is(name_or_path)})"
        )
    return space


def model_pair_encoding(name_or_path: str | None) -> PairEncoding | None:
    """How the model that ``--model.model_name_or_path`` names read text pairs when it was
    fine-tuned: its config.json's ``seqcls_pair_encoding``; None where it has none (a hub id,
    a model seqcls did not fine-tune)."""
    text = _model_config(name_or_path) if name_or_path else None
    value = json.loads(text).get(MODEL_CONFIG_KEY) if text else None
    if value not in (None, "joint", "separate"):
        raise ConfigurationError(
            f"--model.model_name_or_path {name_or_path}: its config.json's {MODEL_CONFIG_KEY} "
            f"is {value!r}, not joint or separate; give --data.pair_encoding"
        )
    return value


def _model_config(name_or_path: str) -> str | None:
    """The text of the model folder's config.json; None where the folder has none."""
    try:
        directory = local_model_dir(name_or_path, default_cache_dir())
    except OSError as error:  # gs://: nothing there, or no config.json (and nothing copied)
        if exists(name_or_path):
            return None  # a folder, as a local one without config.json: what it is is named
        raise unloadable("--model.model_name_or_path", name_or_path, error) from None
    if not os.path.exists(directory) and names_a_local_path(name_or_path):
        missing = FileNotFoundError(f"no such directory: {directory}")
        raise unloadable("--model.model_name_or_path", name_or_path, missing)
    path = os.path.join(directory, "config.json")
    return Path(path).read_text(encoding="utf-8") if os.path.isfile(path) else None


def _what_it_is(name_or_path: str | None) -> str:
    """What a model path (local or ``gs://``) that names no labels is instead, where it is a
    run's other part."""
    if not name_or_path or not exists(name_or_path):
        return ""
    exported = os.path.join(name_or_path.rstrip("/"), "model")
    if exists(exported):
        return f"; it is a run directory, whose exported model is {exported}"
    if name_or_path.endswith(".ckpt"):
        return "; it is a checkpoint: give it as --ckpt_path, with --config RUN/config.yaml"
    return ""
