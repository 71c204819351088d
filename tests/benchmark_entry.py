"""The benchmarks' entry point (benchmarks/run.py) loaded as a module, for their smoke tests."""

import importlib.util
from pathlib import Path
from types import ModuleType

REPO = Path(__file__).resolve().parents[1]


def load_run() -> ModuleType:
    spec = importlib.util.spec_from_file_location("run", REPO / "benchmarks/run.py")
    if spec is None or spec.loader is None:
        raise ImportError("benchmarks/run.py cannot be loaded")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)  # puts benchmarks/ on sys.path for its siblings
    return module
