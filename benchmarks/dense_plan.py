"""``dense-plan``: one epoch of XLA's fixed-shape packed training batches, counted on the host.

seqcls's own data module reads and tokenizes the file and plans the epoch's batches as it does
under a Trainer on XLA (``data/dense_packing.py``); every batch is collated and counted. No
XLA device is needed: the plan and the batches are made on the host. Prints the batch shape,
the rows per batch and the share of real tokens, against padding every row to
``--max-length``::

    python benchmarks/run.py dense-plan --model models/all-MiniLM-L6-v2 \\
        --train GLUE_DIR/SST-2/train.tsv --text-column sentence
"""

import argparse
import statistics
import tempfile
from pathlib import Path
from types import SimpleNamespace
from typing import Any

from harness import command_line, key_value_table, subcommand_parser, write_json
from machine import environment
from pytorch_lightning.accelerators import XLAAccelerator

from seqcls.data.classification import TextClassificationDataModule


def parse_args(argv: list[str]) -> argparse.Namespace:
    p = subcommand_parser("dense-plan", __doc__)
    p.add_argument("--model", required=True, help="model directory (its tokenizer is used)")
    p.add_argument("--train", required=True, help="training file (CSV, TSV, JSON Lines)")
    p.add_argument("--text-column", default="text")
    p.add_argument("--text-pair-column", default=None)
    p.add_argument("--label-column", default="label")
    p.add_argument("--max-length", type=int, default=128)
    p.add_argument("--batch-size", type=int, default=32)
    p.add_argument("--seed", type=int, default=42)
    p.add_argument("--json", type=Path, help="also write the results here")
    return p.parse_args(argv)


def xla_trainer() -> Any:
    """What the data module asks of a Trainer on one XLA device whose model takes packed rows;
    only ``isinstance`` is asked of the accelerator, so none is built (no torch_xla needed)."""
    return SimpleNamespace(
        accelerator=object.__new__(XLAAccelerator),
        world_size=1,
        global_rank=0,
        lightning_module=SimpleNamespace(takes_packed_batches=True),
    )


def run(args: argparse.Namespace, argv: list[str]) -> dict[str, Any]:
    with tempfile.TemporaryDirectory(prefix="seqcls-dense-plan-") as cache:
        data = TextClassificationDataModule(
            train_file=args.train,
            validation_file=args.train,  # not used: no validation rows are held out
            text_column=args.text_column,
            text_pair_column=args.text_pair_column,
            label_column=args.label_column,
            max_length=args.max_length,
            batch_size=args.batch_size,
            tokenizer_name_or_path=args.model,
            cache_dir=cache,
            seed=args.seed,
        )
        data.trainer = xla_trainer()
        data.setup("fit")
        (train,) = data.splits["train"]
        shapes, rows, real, computed = set(), [], 0, 0
        for batch in data.train_dataloader():
            shapes.add(tuple(batch["input_ids"].shape))
            rows.append(batch["examples"])
            real += int((batch["segment_ids"] > 0).sum())
            computed += batch["segment_ids"].numel()
    padded = sum(len(ids) for ids in train["input_ids"]) / (len(train) * args.max_length)
    results = {
        "training_rows": len(train),
        "batches": len(rows),
        "batch_shapes": sorted(shapes),
        "rows_per_batch": statistics.mean(rows),
        "rows_per_batch_min": min(rows),
        "rows_per_batch_max": max(rows),
        "rows_trained": sum(rows),
        "padding_efficiency": real / computed,
        "padding_efficiency_padded_to_max_length": padded,
    }
    print(key_value_table(results))
    report = results | environment() | {"command": command_line(argv)}
    write_json(args.json, report)
    return report
