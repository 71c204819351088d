"""The benchmarks' one entry point: seqcls measured alone, and against the HF Trainer.

    python benchmarks/run.py throughput --config CONFIG [seqcls fit arguments]
        training examples/s, tokens/s, padding efficiency and memory of one seqcls config
    python benchmarks/run.py compare --model MODEL --train FILE --validation FILE [--sides ...]
        seqcls and the HF Trainer on the same rows for the same optimizer steps, each side in
        its own process: speed, time to first step, memory, MFU, dev accuracy, and the ratios
    python benchmarks/run.py whole --model MODEL --train FILE --validation FILE [--sides ...]
        the whole job as a user runs it, process start to exit, seqcls's defaults against
        the HF Trainer, several rounds: seconds (split at the first and last training step),
        dev accuracy, speed-ups
    python benchmarks/run.py start-up [--repeat 5]
        what a process pays before any work: importing torch, Lightning and transformers,
        importing seqcls's command, and seqcls fit --help, each a fresh process
    python benchmarks/run.py glue GLUE_DIR [--tasks rte,mrpc,stsb,cola]
        run_glue's recipe on GLUE tasks with both, to the end: the dev metrics side by side
    python benchmarks/run.py xla-buckets --model MODEL --train FILE
        on one XLA device: packed, max_length-padded and bucketed batches, compiles included
    python benchmarks/run.py dense-plan --model MODEL --train FILE
        one epoch of XLA's fixed-shape packed training batches, planned and counted on the host
    python benchmarks/run.py step-parts --model MODEL --train FILE
        one CPU training step as a seqcls fit runs it, split by operator: matrix products and
        their rate, the AdamW update, attention, other operators, and what is outside them;
        then its floor: its own products alone, the update, and the model at almost no width
    python benchmarks/run.py checkpoint-save --model MODEL
        a fit's checkpoint (weights and AdamW's state) written by Lightning's plain writer and
        by seqcls's, in turn: seconds per save, and the memory Python held while saving
    python benchmarks/run.py gpu-packing --lengths LENGTHS.json
        on a CUDA GPU: packed batches through the variable-length kernel checked against
        unpacked ones, then training and evaluation steps timed per layout
    python benchmarks/run.py onnx --model RUN/model --validation FILE
        ONNX Runtime (fp32 and int8) against PyTorch on the CPU: rows/s at batch 1 and 32,
        accuracy, and how far the logits are from PyTorch's
    python benchmarks/run.py serve-load --model RUN/model --clients N --seconds T
        seqcls serve under N concurrent clients for T seconds on 127.0.0.1, with and without
        dynamic batching: p50 and p99 latency, rows/s, failed requests
    python benchmarks/run.py random-model --shape bert-base --tokenizer DIR --out DIR
        a random-weight encoder of a larger shape, to time what no packaged model has
    python benchmarks/run.py gpu-suite --out DIR --sst2 DIR --mnli DIR [--dry-run]
        every GPU measurement on one card in one run (bert-base's SST-2 job and step,
        bert-large and RoBERTa-large on MNLI, against HF's best): one JSON, one table

``python benchmarks/run.py SUBCOMMAND --help`` lists each one's options. Every subcommand
prints a table and, with ``--json FILE``, also writes everything it measured, the machine and
the command included. They share one harness (``harness.py``: the step clock, running a side
in a fresh process, the report) and one description of the machine (``machine.py``).
"""

import importlib
import json
import sys
from pathlib import Path
from types import ModuleType
from typing import Any

# Run as a script, this folder is on sys.path already; loaded from elsewhere (tests), not.
HERE = str(Path(__file__).resolve().parent)
if HERE not in sys.path:
    sys.path.insert(0, HERE)

SUBCOMMANDS = {
    "throughput": "seqcls_side",
    "compare": "compare",
    "whole": "whole",
    "glue": "glue",
    "xla-buckets": "xla_buckets",
    "dense-plan": "dense_plan",
    "step-parts": "step_parts",
    "checkpoint-save": "checkpoint_save",
    "gpu-packing": "gpu_packing",
    "gpu-suite": "gpu_suite",
    "random-model": "random_model",
    "onnx": "onnx_speed",
    "serve-load": "serve_load",
    "start-up": "start_up",
}


def parse_args(argv: list[str]) -> tuple[ModuleType, Any]:
    """The subcommand's module and its parsed options."""
    if not argv or argv[0] not in SUBCOMMANDS:
        if argv[:1] in (["-h"], ["--help"]):
            print(__doc__)
            raise SystemExit(0)
        given = repr(argv[0]) if argv else "none"
        raise SystemExit(
            f"run.py: give a subcommand ({', '.join(SUBCOMMANDS)}), not {given}; "
            "e.g. python benchmarks/run.py throughput --config configs/local.yaml"
        )
    module = importlib.import_module(SUBCOMMANDS[argv[0]])
    return module, module.parse_args(argv[1:])


def main(argv: list[str] | None = None) -> dict[str, Any]:
    argv = sys.argv[1:] if argv is None else argv
    if argv[:1] == ["worker"]:  # one side, in the process harness.in_own_process started
        _, name, spec, result_file = argv
        result = importlib.import_module(name).worker(json.loads(spec))
        Path(result_file).write_text(json.dumps(result))
        return dict(result)
    module, args = parse_args(argv)
    return dict(module.run(args, argv))


if __name__ == "__main__":
    main()
