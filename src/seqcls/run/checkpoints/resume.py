"""Which checkpoint a ``fit`` starts from: the one given, else the newest complete one of the run.

A preempted job is restarted with the same command (Vertex AI restarts it from the start of
the code), so resuming needs no flag: without ``--ckpt_path``, ``fit`` continues from
``last.ckpt``, the run's latest state, else the newest intact checkpoint of the run (one that
does not load is set aside: ``damaged.py``), and a fresh run directory starts fresh.
``--ckpt_path last`` means the same; any other ``--ckpt_path`` is used as given.
"""

import logging
import os
import posixpath
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from pytorch_lightning.callbacks import ModelCheckpoint

from seqcls.cloud.storage import download_file, exists, files_newest_first, is_remote, parent
from seqcls.errors import ConfigurationError
from seqcls.run.checkpoints.damaged import checkpoint_problem, pass_over, remove_unfinished_writes
from seqcls.run.checkpoints.saving import LAST
from seqcls.run.checkpoints.zero import is_zero_checkpoint

log = logging.getLogger(__name__)


@dataclass(frozen=True)
class StartPoint:
    """Where a run starts: ``source`` as the user knows it (maybe ``gs://``), ``local`` the
    file Lightning loads (a downloaded copy of a remote one); both None for a fresh start."""

    source: str | None = None
    local: str | None = None
    # As saved, for a checkpoint found in the run directory.
    epoch: int | None = None
    model: str | None = None
    step: int | None = None
    labels: tuple[str, ...] | None = None
    problem_type: str | None = None
    # The options of RESUMED_OPTIMIZER it was trained with, where it says.
    optimizer: tuple[tuple[str, Any], ...] = ()
    # Whether it is one of this run directory's own checkpoints, which then continues the run.
    own: bool = False


def check_continues(start: StartPoint, max_epochs: int | None, model: str | None) -> None:
    """Fail when the run directory's checkpoint cannot continue this command's run.

    Usually the command was meant for a new run in a run directory that already holds
    another: one past ``--trainer.max_epochs`` (Lightning would stop with an exception after
    loading everything), or one of another model (its weights would silently replace it).
    """
    fix = "or give a new --trainer.default_root_dir to start afresh"
    if start.epoch is not None and max_epochs not in (None, -1) and start.epoch >= max_epochs:
        raise ConfigurationError(
            f"--trainer.max_epochs {max_epochs}: this run directory's newest checkpoint "
            f"({start.source}) is already at epoch {start.epoch + 1}; raise "
            f"--trainer.max_epochs to train on, {fix}"
        )
    if start.model is not None and model is not None and start.model != model:
        raise ConfigurationError(
            f"--model.model_name_or_path {model}: this run directory's newest checkpoint "
            f"({start.source}) fine-tunes {start.model}; give that model to resume it, {fix}"
        )


def check_same_labels(
    start: StartPoint, labels: Sequence[str] | None, problem_type: str | None, *, resuming: bool
) -> None:
    """Fail when the checkpoint was trained for other labels than this command's.

    Loading it would fail on the label layer's size after loading everything, as a
    traceback, or, with as many labels under other names, silently score (or train on) the
    new names with the old label layer. ``resuming``: a fit, which continues the run.
    """
    if start.labels is None or labels is None:
        return
    if (list(start.labels), start.problem_type) == (list(labels), problem_type):
        return
    wanted = f"{list(labels)} ({problem_type})"
    if resuming and start.own:
        raise ConfigurationError(
            f"this run directory holds a run with labels {list(start.labels)} "
            f"({start.problem_type}, {start.source}), not this data's {wanted}; give a new "
            "--trainer.default_root_dir to start afresh, or the same data to resume it"
        )
    raise ConfigurationError(
        f"--ckpt_path {start.source}: trained for labels {list(start.labels)} "
        f"({start.problem_type}), not this command's {wanted}; give the config of the run "
        "that saved it (--config RUN/config.yaml), or, to train on new labels from its "
        "weights, its exported model as --model.model_name_or_path RUN/model"
    )


# --ckpt_path values Lightning resolves itself ("registry:..." too); "last" is resolved here.
LIGHTNINGS_OWN = ("hpc",)
# Lightning knows a best checkpoint only inside the fit that saved it, not in a new process.
BEST = "best"


def start_point(
    ckpt_path: str | None, checkpoints_dir: str, downloads: Path, *, automatic: bool
) -> StartPoint:
    """The checkpoint ``--ckpt_path`` means; with ``automatic``, None means the newest one.

    ``last`` is resolved here rather than by Lightning, whose search strips the ``gs://``
    from a remote checkpoint folder, finds nothing and silently starts from scratch. A
    remote checkpoint is copied into ``downloads`` first: Lightning would read it through
    gcsfs's default read cache, which has hung on a second read of one object.
    """
    if automatic:  # a fit, which writes checkpoints here: nothing finishes a killed one's
        remove_unfinished_writes(checkpoints_dir)
    if ckpt_path == LAST or (ckpt_path is None and automatic):
        how = "--ckpt_path last" if ckpt_path == LAST else "This run directory has checkpoints"
        return _newest_complete(checkpoints_dir, downloads, how)
    if ckpt_path == BEST:
        raise ConfigurationError(
            "--ckpt_path best: there is no best checkpoint outside the fit that saved it; give "
            "the checkpoint file, such as RUN/checkpoints/best-epochE-stepS.ckpt"
        )
    if ckpt_path is None or ckpt_path in LIGHTNINGS_OWN or ckpt_path.startswith("registry"):
        return StartPoint(ckpt_path, ckpt_path)
    # Checked here, locally too: Lightning's own errors come late, as a traceback.
    if not exists(ckpt_path):
        raise ConfigurationError(f"--ckpt_path: file not found: {ckpt_path}")
    own = _same_folder(parent(ckpt_path), checkpoints_dir)
    if not is_remote(ckpt_path):
        _check_is_a_checkpoint(ckpt_path)
    local = _local_copy(ckpt_path, downloads) if is_remote(ckpt_path) else ckpt_path
    if is_zero_checkpoint(local):
        return StartPoint(ckpt_path, local, own=own)
    state = check_loads(local, training_state=automatic, named=ckpt_path)
    # What it was trained for; how far, only where a run continues its own newest checkpoint.
    return StartPoint(ckpt_path, local, **_trained_for(state), own=own)


def _check_is_a_checkpoint(path: str) -> None:
    """Fail on a local folder that is not a DeepSpeed checkpoint (such as an exported model)."""
    if not os.path.isdir(path) or os.path.isfile(os.path.join(path, "latest")):
        return
    # A run directory: name its own last checkpoint and exported model.
    run = os.path.isdir(os.path.join(path, "checkpoints")) or os.path.isdir(
        os.path.join(path, "model")
    )
    last = os.path.join(path, "checkpoints", "last.ckpt") if run else "RUN/checkpoints/last.ckpt"
    model = os.path.join(path, "model") if run else path
    raise ConfigurationError(
        f"--ckpt_path {path}: a folder, not a checkpoint; --ckpt_path takes a .ckpt file (such "
        f"as {last}), and an exported model is given as --model.model_name_or_path {model}"
    )


def _same_folder(a: str, b: str) -> bool:
    if is_remote(a) or is_remote(b):
        return a.rstrip("/") == b.rstrip("/")
    return os.path.realpath(a) == os.path.realpath(b)


def _newest_complete(checkpoints_dir: str, downloads: Path, how: str) -> StartPoint:
    extension = ModelCheckpoint.FILE_EXTENSION
    found = files_newest_first(checkpoints_dir, extension)
    # last.ckpt is written after every other file of a state (or is that file), so it comes
    # first whatever the times say (a copied run directory may have lost them).
    last = f"{LAST}{extension}"
    found.sort(key=lambda source: posixpath.basename(source) != last)
    intact: list[tuple[str, str, dict[str, Any]]] = []
    for source in found:
        try:
            local = _local_copy(source, downloads) if is_remote(source) else source
        except FileNotFoundError:  # set aside meanwhile by another process of this run
            continue
        problem, state = checkpoint_problem(local)
        if problem:
            pass_over(source, problem, how)
            continue
        intact.append((source, local, state))
        if posixpath.basename(source) == last:
            break
    if not intact:
        log.info("No intact checkpoint in %s, so training starts from scratch", checkpoints_dir)
        return StartPoint()
    # Without an intact last.ckpt, the furthest state: a bucket's copy (previous.ckpt) is
    # newer by its time than the state it holds. The first of equals is the newest file.
    source, local, state = max(intact, key=lambda found: int(found[2].get("global_step", 0)))
    epoch, step = state.get("epoch"), state.get("global_step")
    log.info("%s: resuming from %s (epoch %s, global step %s)", how, source, epoch, step)
    return _saved(source, local, state, own=True)


def check_loads(
    path: str, *, training_state: bool = False, named: str | None = None
) -> dict[str, Any]:
    """The contents of the checkpoint file ``--ckpt_path`` names (``named``; ``path`` its local
    copy); fail in one line where it cannot serve: Lightning's own error comes after the model
    and data have loaded, as a traceback. ``training_state``: fit continues it, which needs
    more than its weights."""
    problem, state = checkpoint_problem(path, training_state=training_state)
    if problem:
        raise ConfigurationError(
            f"--ckpt_path {named or path}: {problem}; give a .ckpt file that seqcls saved"
        )
    return state


def _saved(source: str, local: str, state: dict[str, Any], *, own: bool) -> StartPoint:
    """The start point of a checkpoint whose training ``state`` has loaded."""
    return StartPoint(
        source,
        local,
        int(state["epoch"]),
        state.get("hyper_parameters", {}).get("model_name_or_path"),
        step=int(state.get("global_step", 0)),
        **_trained_for(state),
        own=own,
    )


def _trained_for(state: dict[str, Any]) -> dict[str, Any]:
    """The labels, problem type and optimizer options a loaded checkpoint was trained with,
    where it says."""
    saved = state.get("hyper_parameters", {})
    labels = saved.get("label_names")
    return {
        "labels": tuple(labels) if labels else None,
        "problem_type": saved.get("problem_type"),
        "optimizer": tuple((key, saved[key]) for key in RESUMED_OPTIMIZER if key in saved),
    }


# The model options a fit that continues a checkpoint takes from its saved optimizer and
# schedule (rates, betas, epsilon, weight decay), whatever the command line says; and LoRA's,
# which decide the tensors that train, whose weights and optimizer state the checkpoint holds.
RESUMED_OPTIMIZER = (
    "learning_rate",
    "head_learning_rate",
    "layer_lr_decay",
    "warmup_ratio",
    "weight_decay",
    "adam_betas",
    "adam_epsilon",
    "lora_rank",
    "lora_alpha",
    "lora_target_modules",
)


def check_same_optimizer(start: StartPoint, options: dict[str, Any]) -> None:
    """Fail when a fit would continue ``start`` with other optimizer ``options`` than it was
    trained with: the saved ones would silently win, while config.yaml and the model card
    named the new ones."""
    for key, saved in start.optimizer:
        now = options.get(key, saved)
        if _as_list(now) != _as_list(saved):
            now, saved = _as_flag(now), _as_flag(saved)
            raise ConfigurationError(
                f"--model.{key} {now}: {start.source} was trained with {saved}, and a fit "
                "that continues it keeps the optimizer and schedule it saved; give "
                f"--model.{key} {saved}, or, to train on with other settings, its run's "
                "exported model as --model.model_name_or_path RUN/model in a new "
                "--trainer.default_root_dir"
            )


def _as_flag(value: Any) -> Any:
    """``value`` as the command line takes it: None is ``null`` there."""
    return "null" if value is None else value


def _as_list(value: Any) -> Any:
    return list(value) if isinstance(value, list | tuple) else value


def _local_copy(url: str, downloads: Path) -> str:
    local = download_file(url, downloads / posixpath.basename(url))
    log.info("Copied %s to %s", url, local)
    return str(local)
