"""Where each output of a run goes: the flags, else Vertex AI's ``AIP_*`` folders, else the default.

The run directory (``--trainer.default_root_dir``) holds ``config.yaml``, ``metrics.json``
and the predictions, and by default ``checkpoints/``, ``logs/`` and ``model/`` too. Vertex AI
names the last three itself when a job has ``baseOutputDirectory``, as ``BASE/checkpoints``,
``BASE/logs`` and ``BASE/model``: the same layout, so ``BASE`` becomes the run directory.
"""

import logging
import os
from collections.abc import Mapping
from dataclasses import dataclass

from seqcls.cloud.vertex import vertex_output_dirs
from seqcls.errors import ConfigurationError

log = logging.getLogger(__name__)

# The CLI's default run directory. Left at it, the run directory counts as not chosen
# (an explicit --trainer.default_root_dir runs/default cannot be told apart from the default).
DEFAULT_ROOT = "runs/default"


@dataclass(frozen=True)
class RunLayout:
    root: str
    checkpoints: str
    logs: str
    model: str


def run_layout(
    root: str, checkpoints: str | None, *, environ: Mapping[str, str] | None = None
) -> RunLayout:
    """The folders of a run, from ``--trainer.default_root_dir`` and ``--checkpoint.dirpath``.

    A chosen run directory holds everything, whatever ``AIP_*`` says. Without one, Vertex
    AI's folders are used where set, and their parent is the run directory. A
    ``--checkpoint.dirpath`` always wins for the checkpoints.
    """
    vertex = vertex_output_dirs(environ)
    if vertex is not None and root == DEFAULT_ROOT:
        base = vertex.base
        layout = RunLayout(
            root=base,
            checkpoints=checkpoints or vertex.checkpoints or os.path.join(base, "checkpoints"),
            logs=vertex.logs or os.path.join(base, "logs"),
            model=vertex.model or os.path.join(base, "model"),
        )
        log.info(
            "Vertex AI output folders (from AIP_*): run directory %s, checkpoints %s, "
            "TensorBoard logs %s, model %s",
            layout.root,
            layout.checkpoints,
            layout.logs,
            layout.model,
        )
        return layout
    if vertex is not None:
        log.info("AIP_* output folders ignored: --trainer.default_root_dir is %s", root)
    return RunLayout(
        root=root,
        checkpoints=checkpoints or os.path.join(root, "checkpoints"),
        logs=os.path.join(root, "logs"),
        model=os.path.join(root, "model"),
    )


def check_folders(layout: RunLayout) -> None:
    """Fail in one line where a local file stands where a folder of the run goes: it was found
    only at the first checkpoint, as a traceback, after an epoch of training."""
    for flag, path in [
        ("--trainer.default_root_dir", layout.root),
        ("--checkpoint.dirpath", layout.checkpoints),
        ("--trainer.default_root_dir", layout.logs),
        ("--trainer.default_root_dir", layout.model),
    ]:
        if "://" not in path and os.path.isfile(path):
            raise ConfigurationError(
                f"{flag}: {path} is a file, where the run's folder goes; move it away, or "
                f"give another {flag}"
            )
