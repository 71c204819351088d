"""``model/`` written whole: a fit killed while it exports never leaves one that looks done.

The export writes many files (weights, config, tokenizer, a LoRA adapter), then the fit
writes ``metrics.json`` and, last of all, the model card ``model/README.md``. So:

- a local ``model/`` is written as ``model.partial/`` and renamed into place when whole (an
  older ``model/`` removed just before); a ``model.partial/`` a killed process left is
  removed by the next export;
- a ``gs://`` one, uploaded file by file, first has the older ``model/`` removed, so no
  older card stays beside new files;
- the card is what says the export is complete (``is_complete``): a rerun of the command of a
  run whose checkpoints say it finished, but whose ``model/`` has no card, exports again.
"""

import os
import shutil
from pathlib import Path

from seqcls.cloud.storage import exists, remove_folder
from seqcls.run.outputs.model_card import README

PARTIAL = ".partial"


def staging_folder(model_dir: str) -> Path:
    """The empty local folder to export ``model_dir`` into: ``model_dir.partial``."""
    staging = Path(model_dir.rstrip(os.sep) + PARTIAL)
    if staging.exists():
        shutil.rmtree(staging)  # what a killed export left
    return staging


def move_into_place(staging: Path, model_dir: str) -> None:
    """Make the whole export in ``staging`` the local folder ``model_dir``."""
    if os.path.isdir(model_dir):
        shutil.rmtree(model_dir)
    os.replace(staging, model_dir)


def clear_remote(model_dir: str) -> None:
    """Remove an older export from the remote ``model_dir`` before a new one is uploaded."""
    remove_folder(model_dir)


def is_complete(model_dir: str) -> bool:
    """Whether ``model_dir`` holds a whole export: the card, written last, is there."""
    return exists(os.path.join(model_dir, README))
