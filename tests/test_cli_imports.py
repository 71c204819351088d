"""``import seqcls.cli`` loads no heavy library, and ``seqcls fit --help`` loads none that only
some runs use (adapters, ONNX, serving, buckets, tuning, plots): each costs the start of every
command otherwise. The help stays complete."""

import json
import subprocess
import sys

# What a plain fit never needs: LoRA, ONNX export, serving, gs:// buckets, tuning, DeepSpeed.
ONLY_SOME_RUNS = [
    "peft", "onnx", "onnxruntime", "onnxscript", "fastapi", "uvicorn", "starlette", "gcsfs",
    "optuna", "sklearn", "deepspeed",
]  # fmt: skip
# What a command needs only once it runs; the plots come with Lightning's metrics.
FOR_RUNNING = ["torch", "pytorch_lightning", "transformers", "datasets", "matplotlib"]


def imported_after(code: str) -> tuple[str, list[str]]:
    """``code`` run in a fresh interpreter: its output, and the top-level packages it loaded."""
    probe = (
        f"{code}\nimport json, sys\n"
        "print(json.dumps(sorted({name.split('.')[0] for name in sys.modules})))"
    )
    done = subprocess.run(
        [sys.executable, "-c", probe], capture_output=True, text=True, timeout=300, check=True
    )
    *output, modules = done.stdout.splitlines()
    return "\n".join(output), json.loads(modules)


def test_importing_the_command_loads_no_heavy_library() -> None:
    _, modules = imported_after("import seqcls.cli")
    assert not set(modules) & {*ONLY_SOME_RUNS, *FOR_RUNNING}


def test_fit_help_is_complete_and_loads_nothing_only_some_runs_use() -> None:
    code = (
        "from seqcls.cli import main\n"
        "try:\n"
        "    main(['fit', '--help'])\n"
        "except SystemExit:\n"
        "    pass"
    )
    help_text, modules = imported_after(code)
    assert not set(modules) & set(ONLY_SOME_RUNS)
    for flag in ("--model.lora_rank", "--data.train_file", "--trainer.max_steps", "--config"):
        assert flag in help_text, flag
