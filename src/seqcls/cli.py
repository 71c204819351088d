"""The ``seqcls`` command: fine-tune a sequence classifier (and ``seqcls mlm``: pretrain one).

``seqcls fit|validate|test|predict`` runs the LightningCLI of ``classifier_cli.py``,
``seqcls mlm ...`` that of ``mlm/cli.py``, and ``seqcls tune`` a search of fit runs
(``tune/command.py``); ``seqcls export`` and ``seqcls serve`` are ``serve/command.py``'s
plain commands. The Lightning ones import Lightning, transformers and datasets,
which takes seconds, so this module imports them only once a subcommand runs: ``seqcls``
and ``seqcls --help`` answer at once.
"""

import atexit
import logging
import os
import sys
import threading
from typing import TYPE_CHECKING, Any, NoReturn

from seqcls.errors import ConfigurationError
from seqcls.speedups.allocator import keep_freed_memory

if TYPE_CHECKING:
    from seqcls.classifier_cli import SeqclsCLI

# The subcommands, as ``seqcls --help`` lists them (a test checks them against the CLIs).
SUBCOMMANDS = {
    "fit": "fine-tune a classifier; the same command again resumes it from its run directory",
    "validate": "score a checkpoint on the validation data, into metrics.json",
    "test": "score a checkpoint on the test data, into metrics.json",
    "predict": "write predictions: one row per input, in input order",
    "mlm": "continue masked-LM pretraining: seqcls mlm fit|validate|test",
    "tune": "search fit's flags with Optuna; study, trials and best.yaml in the run directory",
    "export": "write a fitted model as ONNX: seqcls export onnx RUN_DIR/model [--quantize int8]",
    "serve": "serve a fitted model over HTTP (Vertex AI's custom-container contract)",
}
# Plain commands that build no Lightning module: answered without importing Lightning.
_SERVING = ("export", "serve")
_LISTING = "".join(f"  {name:<10}  {text}\n" for name, text in SUBCOMMANDS.items())
HELP = f"""\
usage: seqcls [-h] [--version] {{{",".join(SUBCOMMANDS)}}} ...

seqcls fine-tunes Hugging Face sequence classifiers (BERT, RoBERTa and anything
AutoModelForSequenceClassification loads) with PyTorch Lightning, on a CPU, GPUs (one or
many nodes) or a Cloud TPU. Each run has a run directory (--trainer.default_root_dir) that
holds config.yaml, checkpoints/, logs/, model/ (with a model card) and metrics.json.

subcommands:
{_LISTING}
options:
  -h, --help  show this help message and exit
  --version   print seqcls's version and exit

Every subcommand takes --config FILE (repeat it: configs stack) and --section.key VALUE;
seqcls SUBCOMMAND --help lists every flag, --print_config shows the resolved config.
For example: seqcls fit --config configs/local.yaml
"""


def unknown_subcommand(given: str) -> str:
    """The one line for a first argument that is no subcommand, with the closest one."""
    import difflib

    close = difflib.get_close_matches(given, list(SUBCOMMANDS), n=1, cutoff=0.6)
    hint = f"did you mean {close[0]}? " if close else ""
    return f"{given}: not a subcommand; {hint}(one of {', '.join(SUBCOMMANDS)}; seqcls --help)"


def make_cli(args: Any = None, *, run: bool = True) -> "SeqclsCLI":
    """Parse ``args`` of ``seqcls``, build model, data and trainer, and (with run) run it."""
    from seqcls.classifier_cli import make_cli as make_classifier_cli

    return make_classifier_cli(args, run=run)


def _tune(argv: list[str]) -> None:
    try:
        import optuna  # noqa: F401
    except ImportError:
        raise ConfigurationError(
            "seqcls tune needs Optuna: pip install 'seqcls[tune]' (or bash scripts/setup.sh tune)"
        ) from None
    from seqcls.tune.command import main as tune_main

    tune_main(argv)


def _serving(argv: list[str]) -> None:
    """``seqcls export`` and ``seqcls serve`` (serve/command.py)."""
    from seqcls.serve.command import export_main, serve_main

    logging.basicConfig(format="%(levelname)s %(name)s: %(message)s", level=logging.WARNING)
    logging.getLogger("seqcls").setLevel(logging.INFO)
    try:
        (export_main if argv[0] == "export" else serve_main)(argv[1:])
    except ConfigurationError as error:
        print(f"seqcls: error: {error}", file=sys.stderr)
        sys.exit(2)
    except KeyboardInterrupt:
        sys.exit(130)


def prepare_process() -> None:
    """What a seqcls process sets before anything is imported or built (benchmarks that build
    seqcls in their own process call it too, so they time what users run)."""
    # Before torch_xla loads, which reads it once: the scalars 0 and 1 as data, not constants,
    # so that graphs on a TPU do not change with a value (seqcls.run.fit.xla_graphs).
    os.environ.setdefault("XLA_NO_SPECIAL_SCALARS", "1")
    # Before the first large allocation: training steps reuse freed memory (allocator.py).
    keep_freed_memory()


def main(args: Any = None) -> None:
    argv = sys.argv[1:] if args is None else args
    if isinstance(argv, list) and argv[:1] in ([], ["-h"], ["--help"]):
        print(HELP, end="", file=sys.stdout if argv else sys.stderr)
        if not argv:
            sys.exit(2)  # no subcommand: as argparse does
        return
    if isinstance(argv, list) and argv[:1] == ["--version"]:
        from seqcls import __version__

        print(f"seqcls {__version__}")
        return
    if isinstance(argv, list) and argv[0] not in SUBCOMMANDS and not argv[0].startswith("-"):
        # Before the seconds of imports a subcommand takes; Lightning's parser would list only
        # its own four subcommands, without mlm and tune.
        print(f"seqcls: error: {unknown_subcommand(argv[0])}", file=sys.stderr)
        sys.exit(2)
    if isinstance(argv, list) and argv[0] in _SERVING:
        _serving(argv)
        return
    prepare_process()
    # Imported before logging is set up: Lightning keeps its own handler when it finds none.
    from pytorch_lightning.utilities.exceptions import SIGTERMException

    from seqcls.cloud.retry_notes import say_retries_once
    from seqcls.run.checks.buckets import answer_local_paths_first
    from seqcls.run.outputs.quiet import quiet_libraries
    from seqcls.run.stops.signals import exit_status

    logging.basicConfig(format="%(levelname)s %(name)s: %(message)s", level=logging.WARNING)
    logging.getLogger("seqcls").setLevel(logging.INFO)

    quiet_libraries()
    say_retries_once()  # a bucket's transient answers, retried by gcsfs, said once
    answer_local_paths_first()
    try:
        if isinstance(argv, list) and argv[:1] == ["tune"]:
            _tune(argv[1:])
        elif isinstance(argv, list) and argv[:1] == ["mlm"]:
            from seqcls.mlm.cli import make_mlm_cli

            make_mlm_cli(argv[1:])
        else:
            make_cli(args)
    except ConfigurationError as error:
        if not (error.on_every_process and _global_rank() != 0):
            print(f"seqcls: error: {error}", file=sys.stderr)
        sys.exit(2)
    except SIGTERMException:
        # Stopped by SIGTERM/SIGINT after saving last.ckpt: fail, so the platform retries.
        sys.exit(exit_status())
    except KeyboardInterrupt:
        # Ctrl-C outside training (loading, tokenizing), or a second one: stopped at once.
        print("seqcls: stopped by Ctrl-C", file=sys.stderr)
        sys.exit(130)
    except SystemExit as stop:
        if stop.code == 1 and isinstance(stop.__context__, KeyboardInterrupt):
            sys.exit(130)  # Lightning's own exit after a Ctrl-C it caught: as a shell says it
        raise
    except RuntimeError as error:
        if not _lost_a_peer(error):
            raise
        # Another process of the run ended: one that stopped on a mistake has said so in one
        # line, which this process's traceback from the broken connection would only bury; a
        # lost node says nothing, so this line says what to do.
        stopped = (
            f"process {_global_rank()}: another process of this run stopped (on its own error, "
            "or its node was lost); once that is fixed, run the same command again on every "
            "node to resume from the last checkpoint"
        )
        print(f"seqcls: error: {stopped}", file=sys.stderr)
        sys.exit(1)


def _global_rank() -> int:
    """This process's rank in a distributed run (0 outside one), as Lightning set it."""
    from pytorch_lightning.utilities.rank_zero import rank_zero_only

    return int(getattr(rank_zero_only, "rank", 0))


def _lost_a_peer(error: RuntimeError) -> bool:
    """Whether ``error`` is a distributed run's collective failing on a process that ended."""
    import torch.distributed

    distributed = torch.distributed.is_available() and torch.distributed.is_initialized()
    vanished = ("Connection reset by peer", "Connection closed by peer", "Broken pipe")
    return distributed and any(words in str(error) for words in vanished)


def command() -> NoReturn:
    """The ``seqcls`` console command: ``main``, then a quick exit.

    When ``main`` returns, everything a run promises is written and closed. Tearing down the
    thousands of modules a run imports would then add about 2 s to every command, so the
    exit does what Python's own would that matters, in its order (the threading module's exit
    hooks, then waiting for threads still running; exit handlers, which flush the logs and
    remove temporary folders; flushing the streams) and ends the process without the teardown.
    """
    try:
        main()
    except SystemExit as stop:
        status = stop.code
    else:
        status = 0
    if isinstance(status, str):
        print(status, file=sys.stderr)
    code = status if isinstance(status, int) else int(status is not None)
    # What the interpreter itself calls first at exit: it runs the threading module's exit
    # hooks (which tell idle ThreadPoolExecutor workers, such as torch.compile's, to stop),
    # then waits for the threads still running. Joining them without the hooks hangs forever.
    threading._shutdown()  # type: ignore[attr-defined]
    atexit._run_exitfuncs()
    sys.stdout.flush()
    sys.stderr.flush()
    os._exit(code)


if __name__ == "__main__":
    command()
