"""The ``seqcls`` command: fine-tune a sequence classifier (and ``seqcls mlm``: pretrain one).

``seqcls fit|validate|test|predict`` is a LightningCLI over ``SequenceClassifier`` and
``TextClassificationDataModule``, with the run directory of ``run/command.py``. What the model
learns from the data (tokenizer, label names, problem type, metrics) is linked here, so the
user states it once.
"""

import logging
import sys

import datasets
from pytorch_lightning.cli import ArgsType, LightningArgumentParser
from pytorch_lightning.utilities.exceptions import SIGTERMException

from seqcls.data.classification import TextClassificationDataModule
from seqcls.errors import ConfigurationError
from seqcls.model.classifier import SequenceClassifier
from seqcls.run.command import RunCLI, run_cli
from seqcls.run.signals import exit_status


class SeqclsCLI(RunCLI):
    def link_data_and_model(self, parser: LightningArgumentParser) -> None:
        """The label space the data decides, passed on to the model's head and metrics, and
        how evaluation pools a document's windows (``--data.window_stride``)."""
        for derived in [
            "label_names",
            "problem_type",
            "metrics",
            "validation_names",
            "window_pooling",
        ]:
            parser.link_arguments(f"data.{derived}", f"model.{derived}", apply_on="instantiate")


def make_cli(args: ArgsType = None, *, run: bool = True) -> SeqclsCLI:
    """Parse ``args``, build model, data and trainer, and (with ``run``) run the subcommand."""
    cli: SeqclsCLI = run_cli(SeqclsCLI, SequenceClassifier, TextClassificationDataModule, args, run)
    return cli


def main(args: ArgsType = None) -> None:
    logging.basicConfig(format="%(levelname)s %(name)s: %(message)s", level=logging.WARNING)
    logging.getLogger("seqcls").setLevel(logging.INFO)
    # Reading and caching files is quick; its progress bars would bury the training output.
    datasets.disable_progress_bars()
    argv = sys.argv[1:] if args is None else args
    try:
        if isinstance(argv, list) and argv[:1] == ["mlm"]:
            from seqcls.mlm.cli import make_mlm_cli

            make_mlm_cli(argv[1:])
        else:
            make_cli(args)
    except ConfigurationError as error:
        print(f"seqcls: error: {error}", file=sys.stderr)
        sys.exit(2)
    except SIGTERMException:
        # Stopped by SIGTERM/SIGINT after saving last.ckpt: fail, so the platform retries.
        sys.exit(exit_status())


if __name__ == "__main__":
    main()
