"""``random-model``: a random-weight encoder of a named shape, with a real tokenizer.

Speed depends on a model's shape, not on its weights. Where only a small pretrained model is
at hand (the packaged all-MiniLM-L6-v2), this writes a larger one to time: an encoder without
a classification head, as a pretrained checkpoint is, so that seqcls and the HF Trainer each
draw their own head. Its dev metrics mean nothing; its times are those of the shape.

    python benchmarks/run.py random-model --shape bert-base --tokenizer MODEL_DIR --out DIR

The RoBERTa shapes are RoBERTa encoders (positions counted from after the padding id,
RoBERTa-large's 50,265-row vocabulary) read through the given tokenizer: no package ships
RoBERTa's own, and the shape, not the vocabulary, sets a step's time. They keep two token
types, as the given tokenizer marks a pair's second text (RoBERTa has one: 1,024 weights).
"""

import argparse
from pathlib import Path
from typing import Any

import torch
from harness import subcommand_parser
from transformers import AutoModel, AutoTokenizer, BertConfig, RobertaConfig

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
    "bert-large": {
        "hidden_size": 1024,
        "num_hidden_layers": 24,
        "num_attention_heads": 16,
        "intermediate_size": 4096,
    },
    "roberta-large": {
        "hidden_size": 1024,
        "num_hidden_layers": 24,
        "num_attention_heads": 16,
        "intermediate_size": 4096,
    },
    # Small enough to run the GPU suite's plan on a CPU in seconds (its --dry-run).
    "tiny": {
        "hidden_size": 32,
        "num_hidden_layers": 2,
        "num_attention_heads": 2,
        "intermediate_size": 64,
    },
    "tiny-roberta": {
        "hidden_size": 32,
        "num_hidden_layers": 2,
        "num_attention_heads": 2,
        "intermediate_size": 64,
    },
}
ROBERTA_SHAPES = {"roberta-large", "tiny-roberta"}
ROBERTA_VOCABULARY = 50265


def parse_args(argv: list[str]) -> argparse.Namespace:
    p = subcommand_parser("random-model", __doc__)
    p.add_argument("--shape", choices=sorted(SHAPES), default="bert-base")
    p.add_argument("--tokenizer", required=True, help="model directory whose tokenizer to copy")
    p.add_argument("--out", type=Path, required=True, help="directory to write the model to")
    p.add_argument("--seed", type=int, default=0)
    return p.parse_args(argv)


def write_random_model(shape: str, tokenizer_dir: str | Path, out: Path, seed: int = 0) -> int:
    """Write a random-weight encoder of ``shape`` and ``tokenizer_dir``'s tokenizer to ``out``;
    its number of parameters."""
    tokenizer = AutoTokenizer.from_pretrained(tokenizer_dir)
    if shape in ROBERTA_SHAPES:
        config: BertConfig | RobertaConfig = RobertaConfig(
            vocab_size=max(ROBERTA_VOCABULARY, len(tokenizer)),
            # Positions start after the padding id: room for the longest row past it.
            max_position_embeddings=514,
            type_vocab_size=2,
            pad_token_id=tokenizer.pad_token_id,
            bos_token_id=tokenizer.cls_token_id,
            eos_token_id=tokenizer.sep_token_id,
            **SHAPES[shape],
        )
    else:
        config = BertConfig(vocab_size=len(tokenizer), **SHAPES[shape])
    torch.manual_seed(seed)
    model = AutoModel.from_config(config)
    model.save_pretrained(out)
    tokenizer.save_pretrained(out)
    return sum(p.numel() for p in model.parameters())


def run(args: argparse.Namespace, argv: list[str]) -> dict[str, Any]:
    parameters = write_random_model(args.shape, args.tokenizer, args.out, args.seed)
    print(f"Wrote a random-weight {args.shape} encoder ({parameters:,} parameters) to {args.out}")
    return {"shape": args.shape, "parameters": parameters, "out": str(args.out)}
