"""``seqcls fit|validate|test|predict``: the LightningCLI that fine-tunes a sequence classifier.

A ``RunCLI`` (``run/command.py``) over ``SequenceClassifier`` and
``TextClassificationDataModule``. What the model learns from the data (tokenizer, label names,
problem type, metrics) is linked here, so the user states it once. ``cli.py`` imports this
module only when a subcommand runs: ``seqcls --help`` need not load Lightning.
"""

from typing import Any, ClassVar

from pytorch_lightning.cli import ArgsType, LightningArgumentParser

from seqcls.data.classification import TextClassificationDataModule
from seqcls.model.classifier import SequenceClassifier
from seqcls.run.command import RunCLI, run_cli


class SeqclsCLI(RunCLI):
    # Unset, the number of epochs and of validations per epoch follow from the training set's
    # size (run/fit/recipe.py); --trainer.max_epochs or --trainer.max_steps fixes the length.
    command_trainer_defaults: ClassVar[dict[str, Any]] = {"max_epochs": None}
    # Lightning's own text says an unset length trains 1000 epochs.
    trainer_help: ClassVar[dict[str, str]] = {
        "max_epochs": (
            "Stop training once this number of epochs is reached; unset, with "
            "--trainer.max_steps unset too, the recipe derives it, and the validations per "
            "epoch, from the training set's size (docs/tuning.md#the-default-recipe)."
        ),
    }
    derives_training_length = True
    # Over a checkpoint's saved options: how predictions are decided, and how the model runs.
    evaluation_options = ("threshold", "cpu_matmul_precision", "last_layer_first_token_only")
    continued_fit_options = (
        *evaluation_options,
        "compile",
        "fast_cpu_dropout",
        "gradient_checkpointing",
    )

    def link_data_and_model(self, parser: LightningArgumentParser) -> None:
        """The label space the data decides, passed on to the model's head and metrics, how
        evaluation pools a document's windows (``--data.window_stride``), and whether a pair's
        texts are encoded together or each alone (``--data.pair_encoding``)."""
        for derived in [
            "label_names",
            "problem_type",
            "metrics",
            "validation_names",
            "window_pooling",
            "pair_encoding",
        ]:
            parser.link_arguments(f"data.{derived}", f"model.{derived}", apply_on="instantiate")


def make_cli(args: ArgsType = None, *, run: bool = True) -> SeqclsCLI:
    """Parse ``args``, build model, data and trainer, and (with ``run``) run the subcommand."""
    cli: SeqclsCLI = run_cli(SeqclsCLI, SequenceClassifier, TextClassificationDataModule, args, run)
    return cli
