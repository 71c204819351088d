"""A CPU training step as ``seqcls fit`` runs it, for the benchmarks that take one apart.

``batches_of`` draws random batches of 32 texts and packs each into one model row;
``trainable`` loads the model and sets it up as a fit on a CPU does: the last layer for the
first token only (or mean pooling), attention by segments at torch's default precision, the
fast dropout masks, and the AdamW update a fit runs (the word embeddings by rows, or torch's
fused AdamW on every row).
"""

import argparse
import csv
import random
from typing import Any

import torch
from transformers import AutoModelForSequenceClassification, AutoTokenizer

from seqcls.data.loaders import ONE_ROW_MULTIPLE, padding_id
from seqcls.data.packing import PackInOneRow
from seqcls.model.first_token import compute_last_layer_for_first_token
from seqcls.model.mean_pooling import pool_by_mean
from seqcls.model.packed_forward import PackedForward
from seqcls.model.pretrained import checkpoint_config, dropout_settings, load_for_training
from seqcls.speedups.cpu_dropout import use_cpu_dropout
from seqcls.speedups.matmul_precision import keep_attention_in_mkl
from seqcls.speedups.row_sparse_adamw import RowSparseAdamW

BATCH = 32


def batches_of(args: argparse.Namespace) -> list[dict[str, torch.Tensor]]:
    tokenizer = AutoTokenizer.from_pretrained(args.model)
    with open(args.train, encoding="utf-8-sig", newline="") as stream:
        tsv = args.train.endswith(".tsv")  # GLUE's TSVs quote nothing
        rows = csv.DictReader(
            stream,
            delimiter="\t" if tsv else ",",
            quoting=csv.QUOTE_NONE if tsv else csv.QUOTE_MINIMAL,
        )
        texts = [row[args.text_column] for row in rows]
    if len(texts) < BATCH * args.steps:
        raise SystemExit(
            f"run.py step-parts: --train has {len(texts)} rows, fewer than --steps "
            f"{args.steps} batches of {BATCH} need; give fewer --steps or a larger file"
        )
    texts = random.Random(0).sample(texts, BATCH * args.steps)
    encoded = tokenizer(texts, truncation=True, max_length=128)
    features = [
        {"input_ids": ids, "token_type_ids": types, "labels": i % 2}
        for i, (ids, types) in enumerate(
            zip(encoded["input_ids"], encoded["token_type_ids"], strict=True)
        )
    ]
    collate = PackInOneRow(padding_id(tokenizer), ONE_ROW_MULTIPLE)
    return [collate(features[i : i + BATCH]) for i in range(0, len(features), BATCH)]


def narrow_config(config: Any) -> Any:
    """``config`` with two features per attention head and four times that in the
    feed-forward block: the same layers and operators, almost no arithmetic."""
    narrow = config.__class__.from_dict(config.to_dict())
    narrow.hidden_size = 2 * config.num_attention_heads
    narrow.intermediate_size = 4 * narrow.hidden_size
    # Widths some architectures set apart from hidden_size: ELECTRA's embeddings, DeBERTa's
    # pooler.
    for width in ("embedding_size", "pooler_hidden_size"):
        if getattr(config, width, None) is not None:
            setattr(narrow, width, narrow.hidden_size)
    return narrow


def trainable(args: argparse.Namespace, narrow: bool = False) -> tuple[Any, Any, Any]:
    """The model, its packed forward and its optimizer as a fit on a CPU sets them up; with
    ``narrow``, the same architecture at almost no width and random weights
    (``narrow_config``)."""
    config = checkpoint_config(args.model)
    rates = dropout_settings(config, args.dropout)
    if narrow:
        config = narrow_config(config)
        config.update({"num_labels": 2, **rates})
        model = AutoModelForSequenceClassification.from_config(config).train()
    else:
        model = load_for_training(
            AutoModelForSequenceClassification, args.model, num_labels=2, **rates
        )
    if args.pooling == "mean":
        pool_by_mean(model)
    else:
        compute_last_layer_for_first_token(model)
    keep_attention_in_mkl(model)  # as a fit on a CPU: SDPA at torch's default precision
    use_cpu_dropout(model)
    forward = PackedForward(model)
    forward.use_segments()
    optimizer: torch.optim.Optimizer
    if args.embedding_update == "rows":
        model.get_input_embeddings().sparse = True
        optimizer = RowSparseAdamW(model.parameters(), lr=1e-5, weight_decay=0.01)
    else:
        optimizer = torch.optim.AdamW(model.parameters(), lr=1e-5, weight_decay=0.01, fused=True)
    return model, forward, optimizer


def train_once(forward: Any, optimizer: Any, batch: dict[str, torch.Tensor]) -> None:
    """One training step on ``batch``: forward, backward, the update, the gradients freed."""
    forward(batch).loss.backward()
    optimizer.step()
    optimizer.zero_grad(set_to_none=True)
