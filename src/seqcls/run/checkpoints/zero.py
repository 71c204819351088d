"""DeepSpeed ZeRO checkpoints, which are folders: whether one can resume a run, and its weights.

Lightning's DeepSpeed strategy saves ``NAME.ckpt`` as a folder that DeepSpeed writes:
``latest`` names the tag (Lightning's is ``checkpoint``), and ``TAG/`` holds
``mp_rank_00_model_states.pt`` (the module's weights in training precision, plus Lightning's
own state: epoch, loops, hyper-parameters) and one ``*optim_states.pt`` per data-parallel rank
(each a shard of the fp32 master weights and the optimizer state). The fp32 weights are the
shards put back together, which DeepSpeed's ``zero_to_fp32`` does; Lightning wraps it as
``convert_zero_checkpoint_to_fp32_state_dict``, whose output is an ordinary checkpoint file.
"""

import importlib.util
from pathlib import Path
from typing import Any

import torch

from seqcls.errors import ConfigurationError

MODEL_STATES = "mp_rank_00_model_states.pt"
OPTIMIZER_STATES = "*optim_states.pt"


def is_zero_checkpoint(path: str) -> bool:
    """Whether ``path`` is a checkpoint folder (as DeepSpeed writes) rather than a file."""
    return Path(path).is_dir()


def zero_checkpoint_problem(path: str) -> tuple[str | None, dict[str, Any]]:
    """Why the folder checkpoint ``path`` cannot resume a run (None when it can), and
    Lightning's state saved in it (epoch, global step, hyper-parameters)."""
    latest = Path(path) / "latest"
    if not latest.is_file():
        return "it has no 'latest' file, which DeepSpeed writes after the rest", {}
    tag = Path(path) / latest.read_text().strip()
    if not any(tag.glob(OPTIMIZER_STATES)):
        return f"{tag.name}/ has no {OPTIMIZER_STATES} (optimizer state)", {}
    try:
        # DeepSpeed pickles its own objects beside the tensors, and loads them the same way
        # when the run resumes; mmap reads the index only, so a truncated file fails here.
        state = torch.load(tag / MODEL_STATES, map_location="cpu", weights_only=False, mmap=True)
    except Exception as error:  # any unreadable file: missing, truncated, not a zip
        reason = (str(error).strip().splitlines() or [type(error).__name__])[0]
        return f"{tag.name}/{MODEL_STATES} does not load ({reason})", {}
    if not isinstance(state, dict) or "loops" not in state:
        return f"{tag.name}/{MODEL_STATES} holds no Lightning training state", {}
    return None, state


def gather_weights(path: str, into_file: Path) -> Path:
    """Write the fp32 weights of the folder checkpoint ``path`` to ``into_file``, as an
    ordinary Lightning checkpoint (``state_dict`` with the module's keys)."""
    if importlib.util.find_spec("deepspeed") is None:
        raise ConfigurationError(
            f"{path} is a DeepSpeed checkpoint (a folder); reading its weights needs the "
            "deepspeed package: pip install 'seqcls[deepspeed]'"
        )
    from pytorch_lightning.utilities.deepspeed import convert_zero_checkpoint_to_fp32_state_dict

    convert_zero_checkpoint_to_fp32_state_dict(path, str(into_file))
    return into_file
