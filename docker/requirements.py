"""Write the pip requirements and constraints of one image target, before the source is copied.

    python docker/requirements.py gpu|tpu|serve OUT_DIR  # OUT_DIR/requirements.txt, constraints.txt

The Dockerfile installs these in a layer of their own, so an edit to src/ reinstalls nothing;
tests/cloud resolves the same two files with ``pip install --dry-run``. The requirements are
pyproject.toml's dependencies (not seqcls itself); the constraints are constraints.txt without
its torch pin, because each image brings its own torch:

- gpu: the pytorch/pytorch base image's CUDA build, which pyproject's ``torch>=2.6`` accepts,
  so pip keeps it;
- tpu: torch 2.9.0 with torch_xla 2.9.0. torch_xla needs exactly that torch but does not
  declare it, so both are pinned here;
- serve: built on the gpu image, it adds the ``serve`` extra (ONNX Runtime, FastAPI, uvicorn).
"""

import re
import sys
import tomllib
from pathlib import Path

TARGET_PINS = {
    "gpu": [],
    "tpu": ["torch==2.9.0", "torch_xla[tpu]==2.9.0"],
    "serve": [],
}
# The pyproject extras a target installs besides the dependencies.
TARGET_EXTRAS = {"serve": ["serve"]}


def main(target: str, out: Path, root: Path = Path()) -> None:
    if target not in TARGET_PINS:
        raise SystemExit(f"requirements.py: unknown target {target!r}; use one of: gpu, tpu, serve")
    project = tomllib.loads((root / "pyproject.toml").read_text())["project"]
    extras = [
        line
        for extra in TARGET_EXTRAS.get(target, [])
        for line in project["optional-dependencies"][extra]
    ]
    requirements = [*project["dependencies"], *extras, *TARGET_PINS[target]]
    pins = (root / "constraints.txt").read_text().splitlines()
    constraints = [line for line in pins if not re.match(r"torch\s*==", line, re.IGNORECASE)]
    out.mkdir(parents=True, exist_ok=True)
    (out / "requirements.txt").write_text("\n".join(requirements) + "\n")
    (out / "constraints.txt").write_text("\n".join(constraints) + "\n")


if __name__ == "__main__":
    if len(sys.argv) != 3:
        raise SystemExit("usage: python docker/requirements.py gpu|tpu|serve OUT_DIR")
    main(sys.argv[1], Path(sys.argv[2]))
