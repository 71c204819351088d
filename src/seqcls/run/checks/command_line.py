"""Mistakes in the command line and configs, stopped before any model, data or run folder exists.

jsonargparse's own messages span several lines after a usage screen; here each becomes one
line naming the flag, with the closest known key for a typo. The trainer settings are then
checked against the hardware this process sees, so a GPU or TPU config on the wrong machine
fails at once with what was found and what to use instead, rather than after loading data.
"""

import difflib
import importlib.util
import os
import re
from collections.abc import Iterable, Iterator, Sequence
from pathlib import Path
from typing import Any, NoReturn

import torch
import yaml
from jsonargparse import Namespace
from pytorch_lightning.callbacks import EarlyStopping, ModelCheckpoint
from pytorch_lightning.cli import LightningArgumentParser
from transformers import PreTrainedModel, PreTrainedTokenizerBase

from seqcls.cloud.storage import is_remote
from seqcls.data.metric_names import AVAILABLE, direction
from seqcls.errors import ConfigurationError
from seqcls.hardware import Hardware
from seqcls.option_ranges import RANGES

CPU_CONFIG = "configs/trainer/cpu.yaml"
_GPU = {"gpu", "cuda"}
_BF16 = {"bf16", "bf16-mixed", "bf16-true"}
# The metrics whose direction seqcls knows: every data metric, the loss and the perplexity.
_KNOWN_METRICS = {name for names in AVAILABLE.values() for name in names} | {"loss", "perplexity"}


class OneLineErrorParser(LightningArgumentParser):
    """A LightningCLI parser whose errors are one ``ConfigurationError`` line (module docstring).

    Abbreviated options are refused: argparse would take ``--trainer.max_epoch`` for
    ``--trainer.max_epochs``, and a flag that works only until a longer one is added is a trap.
    """

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        kwargs.setdefault("allow_abbrev", False)
        super().__init__(*args, **kwargs)

    def error(self, message: str, ex: Exception | None = None) -> NoReturn:
        if not self.exit_on_error:  # jsonargparse is trying alternatives and catches this
            super().error(message, ex)
        parser = getattr(ex, "subcommand_parser", None) or self
        # The program name depends on how seqcls was started; the subcommand's does not.
        words = parser.prog.replace(" [options]", "").split()
        command = " ".join(["seqcls", *words[1:]])
        raise ConfigurationError(one_line(message, sorted(_keys(parser)), command))


# How a type jsonargparse expected reads in an error: "expected one of auto, a list or null".
_KINDS = {"NoneType": "null", "list": "a list", "dict": "a mapping"}


def one_line(message: str, known: list[str], command: str = "seqcls fit") -> str:
    """jsonargparse's ``message`` as one line, with a did-you-mean from the ``known`` keys."""
    unknown = re.search(r"unrecognized arguments: (--\S+)", message) or re.search(
        r"does not accept (?:option|nested key) '([^']+)'", message
    )
    if unknown:
        given = unknown.group(1)
        key = given.removeprefix("--")
        close = difflib.get_close_matches(key, known, n=1, cutoff=0.6)
        where = "option" if given.startswith("--") else "key in a --config file"
        hint = f"did you mean {'--' if given.startswith('--') else ''}{close[0]}?" if close else ""
        listing = f"{command} --help lists every option"
        return f"{given}: unknown {where}; {hint + ' ' if hint else ''}({listing})"
    missing = re.search(r"argument (--\S+): expected one argument", message)
    if missing:  # argparse reads a value starting with "-" (-1e-3) as the next option
        flag = missing.group(1)
        return f"{flag}: no value given; a value that starts with '-' goes as {flag}=VALUE"
    key = re.search(r'Parser key "([^"]+)"', message)
    given = re.search(r"(?:Given|Got) value: (.*)", message)
    expected = re.findall(r"Expected a <class '([^']+)'>", message)
    choices = re.search(r"Expected a typing\.Literal\[([^\]]*)\]", message)
    if key and given and (choices or expected):
        kinds = [_KINDS.get(name, name) for name in expected]
        if choices:
            names = ", ".join(name.strip().strip("'\"") for name in choices.group(1).split(","))
            kinds.insert(0, f"one of {names}")
        if "a list" in kinds and key.group(1) in RANGES and RANGES[key.group(1)].example:
            kinds[kinds.index("a list")] += f" such as {RANGES[key.group(1)].example}"
        shown = kinds[0] if len(kinds) == 1 else f"{', '.join(kinds[:-1])} or {kinds[-1]}"
        return f"--{key.group(1)} {given.group(1).strip()}: expected {shown}"
    return " ".join(line.strip() for line in message.splitlines() if line.strip())


def _keys(parser: Any) -> Iterator[str]:
    for action in parser._actions:
        subparsers = getattr(action, "_name_parser_map", None)
        if subparsers:
            for subparser in subparsers.values():
                yield from _keys(subparser)
        elif isinstance(getattr(action, "dest", None), str) and action.dest != "help":
            yield action.dest


def describe_options(parser: LightningArgumentParser, trainer_help: dict[str, str]) -> None:
    """``--help``'s text: each checked option's range, and ``trainer_help``'s text for the
    Trainer options whose Lightning text is wrong for this command."""
    for action in parser._actions:
        name = action.dest.removeprefix("trainer.")
        if action.dest.startswith("trainer.") and name in trainer_help:
            action.help = trainer_help[name]
        if action.dest in RANGES:  # what check_option_ranges holds the value to
            action.help = f"{action.help or ''} Range: {RANGES[action.dest].interval()}."


def check_config_files(argv: Sequence[str]) -> None:
    """Fail on a local ``--config`` file that is not YAML, naming it: the parser's message
    says only ``"<unicode string>", line 2``, whichever of the stacked configs it was."""
    for index, arg in enumerate(argv):
        if arg in ("--config", "-c") and index + 1 < len(argv):
            path = argv[index + 1]
        elif arg.startswith("--config="):
            path = arg.partition("=")[2]
        else:
            continue
        if not os.path.isfile(path):
            continue  # not a local file: the parser says what it is
        try:
            yaml.safe_load(Path(path).read_text(encoding="utf-8"))
        except yaml.YAMLError as error:
            mark = getattr(error, "problem_mark", None)
            where = f" at line {mark.line + 1}, column {mark.column + 1}" if mark else ""
            problem = getattr(error, "problem", None) or str(error).splitlines()[0]
            raise ConfigurationError(f"--config {path}: not valid YAML{where}: {problem}") from None


def check_trainer(trainer: Namespace, hardware: Hardware) -> None:
    """Fail when the trainer settings need hardware that this machine does not have."""
    accelerator = trainer.get("accelerator")
    if not isinstance(accelerator, str):  # an Accelerator object: its owner knows best
        return
    if accelerator in _GPU and not hardware.gpus:
        raise ConfigurationError(
            f"--trainer.accelerator {accelerator}: this machine has no CUDA GPU (torch "
            f"{torch.__version__} finds none); train on the CPU with --config {CPU_CONFIG} "
            "instead, or run on a machine with GPUs"
        )
    if accelerator == "tpu" and not hardware.tpu:
        found = "torch_xla finds no TPU" if hardware.torch_xla else "torch_xla is not installed"
        raise ConfigurationError(
            f"--trainer.accelerator tpu: this machine has no TPU ({found}); train on the CPU "
            f"with --config {CPU_CONFIG} instead, or run on a TPU VM (the seqcls-tpu image)"
        )
    on_gpu = accelerator in _GPU or (accelerator == "auto" and hardware.gpus > 0)
    strategy = trainer.get("strategy")
    strategy_name = strategy if isinstance(strategy, str) else getattr(strategy, "class_path", "")
    if "fsdp" in str(strategy_name).lower() and not on_gpu:  # else a Lightning traceback
        raise ConfigurationError(
            f"--trainer.strategy {strategy_name}: FSDP shards the model across CUDA GPUs, and "
            f"this run has none (--trainer.accelerator {accelerator}); to train on the CPU, "
            "drop FSDP (configs/trainer/fsdp.yaml or --trainer.strategy)"
        )
    precision = str(trainer.get("precision"))
    if on_gpu and precision in _BF16 and not hardware.gpu_bf16:
        raise ConfigurationError(
            f"--trainer.precision {precision}: this GPU ({hardware.gpu_name}) has no bf16 "
            "(V100, T4 and older); use --trainer.precision 16-mixed (fp16 with loss scaling)"
        )
    devices = trainer.get("devices")
    if accelerator in _GPU and isinstance(devices, int) and devices > hardware.gpus:
        raise ConfigurationError(
            f"--trainer.devices {devices}: this machine has {hardware.gpus} GPU(s); pass "
            f"--trainer.devices {hardware.gpus}, or -1 for every GPU"
        )


def check_trains(trainer: Namespace) -> None:
    """A fit of 0 epochs or 0 steps trains nothing, then exports the untrained model as a
    finished run (-1 is Lightning's "no limit", and a length left unset is the recipe's)."""
    for flag in ("max_epochs", "max_steps"):
        if trainer.get(flag) == 0:
            raise ConfigurationError(
                f"--trainer.{flag} 0: the fit would train nothing and export the untrained "
                f"model; give --trainer.{flag} 1 or more"
            )


def check_checkpoint_mode(mode: str | None) -> None:
    """Lightning refuses another mode only when the callback is built, as a traceback."""
    if mode not in (None, "min", "max"):
        raise ConfigurationError(f"--checkpoint.mode {mode}: expected one of min, max")


def check_strategy(strategy: Any, run_dir: str) -> None:
    """DeepSpeed must be installed (else Lightning's message comes as a parser traceback),
    and writes its checkpoint folders with plain file calls, from every process."""
    name = strategy if isinstance(strategy, str) else getattr(strategy, "class_path", "")
    if "deepspeed" not in str(name).lower():
        return
    if importlib.util.find_spec("deepspeed") is None:
        raise ConfigurationError(
            f"--trainer.strategy {name}: the deepspeed package is not installed here; "
            "install it with pip install 'seqcls[deepspeed]' (bash scripts/setup.sh "
            "deepspeed), or leave configs/trainer/deepspeed.yaml out"
        )
    if is_remote(run_dir):
        raise ConfigurationError(
            f"--trainer.default_root_dir {run_dir}: DeepSpeed cannot write its checkpoint "
            "folders to a bucket URL; give a local or mounted path (on Vertex AI "
            "/gcs/BUCKET/..., the bucket mounted by Cloud Storage FUSE)"
        )


def check_max_length(
    max_length: int,
    tokenizer: PreTrainedTokenizerBase,
    model: PreTrainedModel,
    *,
    pairs: bool = False,
) -> None:
    """Fail before training when inputs could be longer than the model has positions for, or
    so short that the special tokens leave no room for text (one token of each text)."""
    special = tokenizer.num_special_tokens_to_add(pair=pairs)
    shortest = special + (2 if pairs else 1)
    if max_length < shortest:
        what = "pair" if pairs else "row"
        raise ConfigurationError(
            f"--data.max_length {max_length} leaves no room for text: this tokenizer adds "
            f"{special} special tokens to each {what}; give {shortest} or more, e.g. 128"
        )
    positions = getattr(model.config, "max_position_embeddings", None)
    tokenizer_limit = tokenizer.model_max_length
    # Some families reserve positions (RoBERTa: 514 embeddings, 512 usable); the tokenizer
    # knows the usable number, but some tokenizers report a huge placeholder instead.
    limits = [n for n in (positions, tokenizer_limit) if isinstance(n, int) and n < 1_000_000]
    if limits and max_length > min(limits):
        raise ConfigurationError(
            f"--data.max_length {max_length} is longer than the model takes "
            f"({min(limits)} tokens); set --data.max_length {min(limits)} or less"
        )


def check_scores_trained_weights(
    subcommand: str | None, ckpt_path: str | None, label_layer: str | None, model: object
) -> None:
    """validate, test and predict without a checkpoint score the model as loaded: fine for a
    fine-tuned model (a fit's ``model/``), random guesses where its label layer is new (a
    run's ``config.yaml`` names the pretrained model it started from)."""
    if subcommand in ("validate", "test", "predict") and not ckpt_path and label_layer == "new":
        raise ConfigurationError(
            f"--ckpt_path: not given, and {model} has no label layer for these labels (a new "
            f"one would be random), so {subcommand} would score guesses; pass --ckpt_path "
            "RUN/checkpoints/last.ckpt, or --model.model_name_or_path RUN/model (a fit's "
            "exported model)"
        )


def check_monitor_directions(callbacks: Iterable[Any]) -> None:
    """Refuse a callback given by hand (``--trainer.callbacks+=EarlyStopping`` or
    ``ModelCheckpoint``) whose ``mode`` contradicts the metric it monitors. Both keep
    Lightning's default ``mode="min"`` whatever they watch: on ``val/accuracy`` the stop comes as
    the accuracy rises, and the checkpoint kept (which ``model/`` then exports) is the worst."""
    for callback in callbacks:
        if not isinstance(callback, EarlyStopping | ModelCheckpoint) or not callback.monitor:
            continue
        name = str(callback.monitor).rpartition("/")[2]
        wanted = direction(name)
        if name not in _KNOWN_METRICS or callback.mode == wanted:
            continue
        stop = isinstance(callback, EarlyStopping)
        kind = "EarlyStopping" if stop else "ModelCheckpoint"
        harm = f"stops the fit when {name} gets better" if stop else f"keeps the worst {name}"
        instead = "--early_stopping.patience N" if stop else "--checkpoint.monitor"
        raise ConfigurationError(
            f"--trainer.callbacks {kind}: monitor {callback.monitor} with mode {callback.mode} "
            f"{harm}; add --trainer.callbacks.mode {wanted}, or use {instead}, "
            "whose direction follows the metric"
        )


def check_logged(flag: str, metric: str | None, logged: Iterable[str]) -> None:
    """Refuse a metric to monitor that no validation logs (``logged``; none known: nothing to
    check). Lightning finds it out at the first validation, as a traceback after training."""
    names = sorted(logged)
    if metric and names and metric not in names:
        raise not_logged(flag, metric, names)


def check_monitor(monitor: str | None, logged: Iterable[str]) -> None:
    """``check_logged`` for ``--checkpoint.monitor``, which may also watch what is logged
    outside validation: Lightning's ``epoch`` and ``step``, the training loss, the rate."""
    if monitor in ("epoch", "step") or str(monitor).startswith(("train/", "lr-")):
        return
    check_logged("--checkpoint.monitor", monitor, logged)


def not_logged(flag: str, metric: str, logged: Iterable[str]) -> ConfigurationError:
    return ConfigurationError(
        f"{flag} {metric}: not logged at validation; choose one of {', '.join(sorted(logged))}"
    )
