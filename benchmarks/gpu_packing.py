"""``gpu-packing``: packed batches on a CUDA GPU, checked against unpacked ones, then timed.

Two parts, on the first CUDA device:

1. **Check** (always): the variable-length kernel (``src/seqcls/speedups/varlen_attention.py``),
   through seqcls's own ``PackedForward``, against the same rows unpacked, for BERT, RoBERTa,
   XLM-R and ELECTRA (tiny random models): logits in bf16 and fp32 evaluation, and the
   gradients of a training step without attention dropout. Prints each relative error;
   exits 1 if one is over its bound.
2. **Timing** (unless ``--check-only``): training steps (forward, backward, AdamW) and
   evaluation forwards of random-weight models of all-MiniLM-L6-v2's and bert-base's shapes,
   last layer cut to the first token as seqcls does, on batches of 32 rows whose lengths are
   drawn from a task's real lengths (``--lengths``: JSON, task name to a list of token
   counts). Layouts: each batch padded to its longest (multiple of 8), packed into rows of
   128 with the block mask, packed with the kernel, and packed into one row of every token.

    python benchmarks/run.py gpu-packing --lengths lengths.json [--steps 20] [--json out.json]

``python benchmarks/run.py gpu-packing --lengths-of TASK=FILE[:COLUMN[,PAIR]] --tokenizer DIR
--lengths lengths.json`` writes the lengths file from a CSV or TSV (truncated at 128 tokens).
"""

import argparse
import json
import random
import statistics
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import torch
from harness import subcommand_parser
from random_model import SHAPES
from transformers import AutoConfig, AutoModelForSequenceClassification, BertConfig

from seqcls.data.packing import pack
from seqcls.model.first_token import compute_last_layer_for_first_token
from seqcls.model.packed_forward import PackedForward
from seqcls.speedups.varlen_attention import kernel, kernel_works

CHECKED = ("bert", "roberta", "xlm-roberta", "electra")
ROWS = 32
PAD = 0
# bf16 keeps 8 bits of mantissa: two kernels' roundings differ by about 1e-2 relative.
BOUNDS = {"bf16": 3e-2, "fp32": 1e-4, "switched": 0.0}


def parse_args(argv: list[str]) -> argparse.Namespace:
    p = subcommand_parser("gpu-packing", __doc__)
    p.add_argument("--lengths", type=Path, required=True, help="JSON: task -> token counts")
    p.add_argument("--lengths-of", action="append", default=[], metavar="TASK=FILE[:COLS]")
    p.add_argument("--tokenizer", help="tokenizer directory, for --lengths-of")
    p.add_argument("--shapes", default="minilm,bert-base")
    p.add_argument("--steps", type=int, default=20)
    p.add_argument("--check-only", action="store_true")
    p.add_argument("--json", type=Path)
    return p.parse_args(argv)


def write_lengths(specs: list[str], tokenizer_dir: str, out: Path) -> None:
    import csv

    from transformers import AutoTokenizer

    tokenizer = AutoTokenizer.from_pretrained(tokenizer_dir)
    lengths = {}
    for spec in specs:
        task, _, rest = spec.partition("=")
        path, _, columns = rest.partition(":")
        names = (columns or "text").split(",")
        with open(path, newline="") as handle:
            rows = list(csv.DictReader(handle, delimiter="\t" if path.endswith(".tsv") else ","))
        texts = [[row[name] for row in rows] for name in names]
        ids = tokenizer(*texts, truncation=True, max_length=128)["input_ids"]
        lengths[task] = [len(row) for row in ids]
    out.write_text(json.dumps(lengths))


def features(lengths: list[int], vocab: int, seed: int) -> list[dict[str, Any]]:
    rng = random.Random(seed)
    return [
        {
            "input_ids": [rng.randrange(3, vocab) for _ in range(length)],
            "labels": rng.randrange(2),
            "index": index,
        }
        for index, length in enumerate(rng.choices(lengths, k=ROWS))
    ]


def padded(rows: list[dict[str, Any]], multiple: int = 8) -> dict[str, torch.Tensor]:
    longest = -(-max(len(row["input_ids"]) for row in rows) // multiple) * multiple
    ids = [row["input_ids"] + [PAD] * (longest - len(row["input_ids"])) for row in rows]
    mask = [[1] * len(row["input_ids"]) + [0] * (longest - len(row["input_ids"])) for row in rows]
    return {
        "input_ids": torch.tensor(ids),
        "attention_mask": torch.tensor(mask),
        "labels": torch.tensor([row["labels"] for row in rows]),
    }


def on(batch: dict[str, torch.Tensor], device: torch.device) -> dict[str, torch.Tensor]:
    return {key: value.to(device) for key, value in batch.items()}


def relative(value: torch.Tensor, reference: torch.Tensor) -> float:
    return float((value.float() - reference.float()).norm() / reference.float().norm())


def check(device: torch.device) -> dict[str, float]:
    """Relative errors of packed (kernel) against unpacked, per model type and precision."""
    errors: dict[str, float] = {}
    for model_type in CHECKED:
        config = AutoConfig.for_model(
            model_type,
            vocab_size=100,
            hidden_size=64,
            num_hidden_layers=2,
            num_attention_heads=4,
            intermediate_size=128,
            max_position_embeddings=160,
            num_labels=3,
            pad_token_id=1,
            attention_probs_dropout_prob=0.0,
            hidden_dropout_prob=0.0,
            attn_implementation="sdpa",
        )
        torch.manual_seed(0)
        model = AutoModelForSequenceClassification.from_config(config).to(device)
        compute_last_layer_for_first_token(model)
        forward = PackedForward(model)
        if not forward.use_varlen(device):
            errors[f"{model_type} switched to the kernel"] = 1.0
        rows = features([5, 9, 17, 33, 64, 80], 100, seed=1)
        for row in rows:
            row["labels"] %= 3
        batch, unpacked = on(pack(rows, 128, 1), device), on(padded(rows, 1), device)
        unpacked["input_ids"][unpacked["attention_mask"] == 0] = 1
        for precision, dtype in (("bf16", torch.bfloat16), ("fp32", torch.float32)):
            with torch.autocast("cuda", dtype=dtype, enabled=dtype != torch.float32):
                model.train()  # dropout is 0: the kernel runs in training too
                runs = {}
                for name, inputs in (("packed", batch), ("unpacked", unpacked)):
                    model.zero_grad()
                    output = forward(inputs) if name == "packed" else model(**inputs)
                    output.loss.backward()
                    grads = torch.cat(
                        [p.grad.flatten() for p in model.parameters() if p.grad is not None]
                    )
                    runs[name] = (output.logits.detach(), grads)
            errors[f"{model_type} {precision} logits"] = relative(
                runs["packed"][0], runs["unpacked"][0]
            )
            errors[f"{model_type} {precision} gradients"] = relative(
                runs["packed"][1], runs["unpacked"][1]
            )
    return errors


def timed(step: Callable[[int], None], steps: int) -> float:
    """Median milliseconds a step over three rounds of ``steps``, after a warm-up round."""
    rounds = []
    for round_ in range(4):
        torch.cuda.synchronize()
        start = time.perf_counter()
        for index in range(steps):
            step(index)
        torch.cuda.synchronize()
        if round_:
            rounds.append((time.perf_counter() - start) * 1000 / steps)
    return statistics.median(rounds)


def timings(
    device: torch.device, lengths: dict[str, list[int]], shapes: list[str], steps: int
) -> list[dict[str, Any]]:
    results = []
    for shape in shapes:
        config = BertConfig(
            vocab_size=30522, num_labels=2, attn_implementation="sdpa", **SHAPES[shape]
        )
        torch.manual_seed(0)
        model = AutoModelForSequenceClassification.from_config(config).to(device)
        compute_last_layer_for_first_token(model)
        model.forward_padded = lambda batch, model=model: model(**batch)
        forward = PackedForward(model)
        switched = forward.use_varlen(device)
        optimizer = torch.optim.AdamW(model.parameters(), lr=1e-5, fused=True)
        for task, counts in lengths.items():
            rows = [features(counts, config.vocab_size, seed) for seed in range(steps)]
            tokens = sum(len(r["input_ids"]) for batch in rows for r in batch) / steps
            layouts = {
                "padded to longest": ([on(padded(b), device) for b in rows], False),
                "packed 128, mask": ([on(pack(b, 128, PAD), device) for b in rows], False),
                "packed 128, kernel": ([on(pack(b, 128, PAD), device) for b in rows], True),
                "packed one row, kernel": (
                    [on(pack(b, sum(len(r["input_ids"]) for r in b), PAD), device) for b in rows],
                    True,
                ),
            }
            if not switched:
                layouts = {name: value for name, value in layouts.items() if not value[1]}
            for precision, dtype in (("bf16", torch.bfloat16), ("fp32", torch.float32)):
                for layout, (batches, varlen) in layouts.items():
                    forward.varlen = varlen
                    run = forward if "packed" in layout else model.forward_padded
                    row = {
                        "shape": shape,
                        "task": task,
                        "precision": precision,
                        "layout": layout,
                        "real tokens a batch": round(tokens, 1),
                    }
                    for mode, dropout in (
                        ("train", 0.1),
                        ("train, no attention dropout", 0.0),
                        ("eval", 0.0),
                    ):
                        if mode != "eval" and not varlen and dropout == 0.0:
                            continue
                        row[mode] = timed(
                            step_of(model, run, optimizer, batches, dtype, mode, dropout), steps
                        )
                    results.append(row)
                    print(json.dumps(row), flush=True)
            forward.varlen = switched
        torch.cuda.empty_cache()
    return results


def step_of(
    model: Any,
    run: Callable[[dict[str, torch.Tensor]], Any],
    optimizer: Any,
    batches: list[dict[str, torch.Tensor]],
    dtype: torch.dtype,
    mode: str,
    dropout: float,
) -> Callable[[int], None]:
    for module in model.modules():
        if type(module).__name__.endswith("SelfAttention"):
            module.dropout.p = dropout
    autocast = dtype != torch.float32

    def step(index: int) -> None:
        batch = batches[index % len(batches)]
        if mode == "eval":
            model.eval()
            with torch.no_grad(), torch.autocast("cuda", dtype=dtype, enabled=autocast):
                run(batch)
            return
        model.train()
        with torch.autocast("cuda", dtype=dtype, enabled=autocast):
            loss = run(batch).loss
        loss.backward()
        optimizer.step()
        optimizer.zero_grad(set_to_none=True)

    return step


def run(args: argparse.Namespace, argv: list[str]) -> dict[str, Any]:
    if args.lengths_of:
        write_lengths(args.lengths_of, args.tokenizer, args.lengths)
        print(f"Wrote {args.lengths}")
        return {"lengths": str(args.lengths)}
    if not torch.cuda.is_available():
        raise SystemExit("run.py gpu-packing: no CUDA device here; run it on a machine with a GPU")
    device = torch.device("cuda")
    print(
        json.dumps(
            {
                "gpu": torch.cuda.get_device_name(0),
                "torch": torch.__version__,
                "kernel": kernel() is not None,
                "kernel works": kernel_works(device),
            }
        )
    )
    errors = check(device)
    failed = [name for name, error in errors.items() if not error <= BOUNDS[name.split()[1]]]
    for name, error in errors.items():
        print(f"check {name}: relative error {error:.2e}", "FAILED" if name in failed else "")
    results = (
        []
        if args.check_only
        else timings(
            device, json.loads(args.lengths.read_text()), args.shapes.split(","), args.steps
        )
    )
    report = {"command": argv, "errors": errors, "timings": results}
    if args.json:
        args.json.write_text(json.dumps(report, indent=1))
    print(
        "| shape | task | precision | layout | train ms | train, no attention dropout | eval ms |"
    )
    print("|---|---|---|---|---|---|---|")
    for row in results:
        cells = [
            f"{row[mode]:.2f}" if mode in row else "-"
            for mode in ("train", "train, no attention dropout", "eval")
        ]
        print(
            f"| {row['shape']} | {row['task']} | {row['precision']} | {row['layout']} | "
            + " | ".join(cells)
            + " |"
        )
    if failed:
        raise SystemExit(f"run.py gpu-packing: over the bound: {', '.join(failed)}")
    return report
