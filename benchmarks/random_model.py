"""``random-model``: a random-weight BERT encoder of a named shape, with a real tokenizer.

Speed depends on a model's shape, not on its weights. Where only a small pretrained model is
at hand (the packaged all-MiniLM-L6-v2), this writes a larger one to time: an encoder without
a classification head, as a pretrained checkpoint is, so that seqcls and the HF Trainer each
draw their own head. Its dev metrics mean nothing; its times are those of the shape.

    python benchmarks/run.py random-model --shape bert-base --tokenizer MODEL_DIR --out DIR
"""

import argparse
from pathlib import Path
from typing import Any

import torch
from harness import subcommand_parser
from transformers import AutoTokenizer, BertConfig, BertModel

SHAPES = {
    "minilm": {
        "hidden_size": 384,
        "num_hidden_layers": 6,
        "num_attention_heads": 12,
        "intermediate_size": 1536,
    },
    "bert-base": {
        "hidden_size": 768,
        "num_hidden_layers": 12,
        "num_attention_heads": 12,
        "intermediate_size": 3072,
    },
}


def parse_args(argv: list[str]) -> argparse.Namespace:
    p = subcommand_parser("random-model", __doc__)
    p.add_argument("--shape", choices=sorted(SHAPES), default="bert-base")
    p.add_argument("--tokenizer", required=True, help="model directory whose tokenizer to copy")
    p.add_argument("--out", type=Path, required=True, help="directory to write the model to")
    p.add_argument("--seed", type=int, default=0)
    return p.parse_args(argv)


def run(args: argparse.Namespace, argv: list[str]) -> dict[str, Any]:
    tokenizer = AutoTokenizer.from_pretrained(args.tokenizer)
    config = BertConfig(vocab_size=len(tokenizer), **SHAPES[args.shape])
    torch.manual_seed(args.seed)
    model = BertModel(config)
    model.save_pretrained(args.out)
    tokenizer.save_pretrained(args.out)
    parameters = sum(p.numel() for p in model.parameters())
    print(f"Wrote a random-weight {args.shape} encoder ({parameters:,} parameters) to {args.out}")
    return {"shape": args.shape, "parameters": parameters, "out": str(args.out)}
