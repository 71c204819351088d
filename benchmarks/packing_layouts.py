"""One training batch in each layout, timed side by side: sub-batches, packed rows, the cost model.

    python benchmarks/packing_layouts.py MODEL GLUE_TSV {single,pair} LAYOUTS [STEPS]

LAYOUTS is a comma list of ``subN`` (N length-sorted pieces), ``packL`` (packed rows of at
most L tokens, block mask), ``packbest`` (packed, the row length the cost model picks),
``costmodel`` (per batch, packed or split by the cost model: what ``--data.packing auto``
does for a model whose attention cannot follow the segments) and ``onerow`` (the whole batch
in one model row, attention by segments: what ``--data.packing auto`` does on a CPU for
BERT, RoBERTa, XLM-R, ELECTRA and their kind; ``speedups/segment_attention.py``), or
``onerowN``, the same with N groups of segments for attention instead of ``ATTENTION_GROUPS``
(4), or ``onerowsdpa``, one row with every group attended by SDPA's kernel, none by explicit
products (``EXPLICIT_ATTENTION_MAX_LENGTH``). The same
random batches of 32 run forward and backward in every layout, interleaved batch by batch so
that a busy machine slows every layout alike; the median step time is printed per layout.
Threads: ``THREADS`` (default 2). Dropout: the model's own rates, or every rate ``DROPOUT``
when set (``DROPOUT=0``: a fit's default). Dropout draws its masks as a seqcls fit on a CPU does
(``speedups/cpu_dropout.py``); ``TORCH_DROPOUT=1`` keeps torch's, as the cost model was first
measured.
"""

import collections
import csv
import os
import random
import statistics
import sys
import time
from typing import Any

import torch
from transformers import AutoModelForSequenceClassification, AutoTokenizer

from seqcls.data.loaders import ONE_ROW_MULTIPLE, padding_id
from seqcls.data.packing import PackInOneRow, PackOrSplit, best_row_length, pack
from seqcls.data.sub_batches import split_by_length
from seqcls.model.first_token import compute_last_layer_for_first_token
from seqcls.model.packed_forward import PackedForward
from seqcls.model.pretrained import checkpoint_config, dropout_settings
from seqcls.speedups import segment_attention
from seqcls.speedups.cpu_dropout import use_cpu_dropout
from seqcls.speedups.segment_attention import ATTENTION_GROUPS, EXPLICIT_ATTENTION_MAX_LENGTH


def main(model_path: str, tsv: str, kind: str, layouts: list[str], steps: int) -> None:
    torch.set_num_threads(int(os.environ.get("THREADS", "2")))
    tokenizer = AutoTokenizer.from_pretrained(model_path)
    with open(tsv, encoding="utf-8-sig") as stream:
        table = list(csv.reader(stream, delimiter="\t", quoting=csv.QUOTE_NONE))[1:]
    rows = random.Random(0).sample(table, 32 * steps)
    if kind == "single":  # SST-2: sentence, label
        encoded = tokenizer([r[0] for r in rows], truncation=True, max_length=128)
        labels = [int(r[-1]) for r in rows]
    else:  # MRPC: label, id, id, sentence, sentence
        texts = [r[3] for r in rows], [r[4] for r in rows]
        encoded = tokenizer(*texts, truncation=True, max_length=128)
        labels = [int(r[0]) for r in rows]
    features = [
        {key: encoded[key][i] for key in ("input_ids", "token_type_ids")} | {"labels": labels[i]}
        for i in range(len(rows))
    ]
    batches = [features[i : i + 32] for i in range(0, len(features), 32)]
    rates = {}
    if "DROPOUT" in os.environ:
        rates = dropout_settings(checkpoint_config(model_path), float(os.environ["DROPOUT"]))
    model = AutoModelForSequenceClassification.from_pretrained(
        model_path, num_labels=2, **rates
    ).train()
    compute_last_layer_for_first_token(model)
    if os.environ.get("TORCH_DROPOUT") != "1":
        use_cpu_dropout(model)
    packed_forward = PackedForward(model)
    by_segments = PackedForward(model)
    by_segments.use_segments()
    pad = padding_id(tokenizer)
    chosen: dict[str, list[Any]] = collections.defaultdict(list)

    def padded(rows: list[dict[str, Any]]) -> dict[str, torch.Tensor]:
        longest = max(len(row["input_ids"]) for row in rows)
        batch = {
            key: torch.tensor([row[key] + [0] * (longest - len(row[key])) for row in rows])
            for key in ("input_ids", "token_type_ids")
        }
        batch["attention_mask"] = (batch["input_ids"] != 0).long()
        batch["labels"] = torch.tensor([row["labels"] for row in rows])
        return batch

    def step(layout: str, rows: list[dict[str, Any]]) -> None:
        lengths = [len(row["input_ids"]) for row in rows]
        if layout.startswith("sub"):
            for piece in split_by_length(lengths, int(layout[3:])):
                loss = model(**padded([rows[i] for i in piece])).loss
                (loss * len(piece) / len(rows)).backward()
        elif layout.startswith("onerow"):
            groups = layout.removeprefix("onerow").removesuffix("sdpa")
            by_segments.attention_groups = int(groups or ATTENTION_GROUPS)
            explicit = 0 if layout.endswith("sdpa") else EXPLICIT_ATTENTION_MAX_LENGTH
            segment_attention.EXPLICIT_ATTENTION_MAX_LENGTH = explicit
            by_segments(PackInOneRow(pad, ONE_ROW_MULTIPLE)(rows)).loss.backward()
        elif layout in ("costmodel", "packbest"):
            length, cost = best_row_length(lengths)
            split = PackOrSplit(None, 4, pad, always=False)
            if layout == "costmodel" and split.split_cost(lengths) <= cost:
                chosen[layout].append("split")
                step("sub4", rows)
                return
            chosen[layout].append(length)
            packed_forward(pack(rows, length, pad)).loss.backward()
        else:
            packed_forward(pack(rows, int(layout[4:]), pad)).loss.backward()
        model.zero_grad(set_to_none=True)

    times: dict[str, list[float]] = {layout: [] for layout in layouts}
    try:
        for rows_of_batch in batches:
            for layout in layouts:
                start = time.perf_counter()
                step(layout, rows_of_batch)
                times[layout].append(time.perf_counter() - start)
    finally:
        segment_attention.EXPLICIT_ATTENTION_MAX_LENGTH = EXPLICIT_ATTENTION_MAX_LENGTH
    first = statistics.median(times[layouts[0]][1:])
    for layout in layouts:
        median = statistics.median(times[layout][1:])  # the first batch warms up
        print(f"{layout}: {median * 1000:.0f} ms/step, {32 / median:.0f} examples/s, "
              f"{first / median:.2f}x {layouts[0]}")  # fmt: skip
    for layout, picks in chosen.items():
        print(f"{layout} chose: {dict(collections.Counter(picks))}")


if __name__ == "__main__":
    arguments = sys.argv[1:]
    main(*arguments[:3], arguments[3].split(","), int(arguments[4]) if len(arguments) > 4 else 12)
