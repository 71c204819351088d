"""RunCLI: a LightningCLI in which every run has a run directory, for each seqcls command.

The run directory (``--trainer.default_root_dir``, local or ``gs://``) gets the resolved
``config.yaml``, checkpoints that a rerun of the same command resumes from, TensorBoard logs,
the exported model and ``metrics.json``. ``seqcls`` (``cli.py``) and ``seqcls mlm``
(``mlm/cli.py``) both build on this class and differ only in model, data and their links.
"""

import os
import sys
import tempfile
import time
from contextlib import nullcontext
from pathlib import Path
from typing import Any, ClassVar

from jsonargparse import Namespace
from pytorch_lightning import LightningModule, Trainer
from pytorch_lightning.cli import ArgsType, LightningArgumentParser, LightningCLI

from seqcls.cloud.secrets import apply_secrets
from seqcls.cloud.vertex import apply_vertex_cluster, cluster_num_nodes
from seqcls.cloud.write_faults import writing
from seqcls.data.base import DEFAULT_SEED, TextDataModule
from seqcls.run.callbacks import add_callback_options, run_callbacks
from seqcls.run.checkpoints.atomic_io import with_atomic_io
from seqcls.run.checkpoints.resume import check_continues, check_loads, start_point
from seqcls.run.checkpoints.saving import BestCheckpoint, LastCheckpoint, configured_best_checkpoint
from seqcls.run.checks.buckets import check_run_buckets
from seqcls.run.checks.built import check_built
from seqcls.run.checks.checkpoint_options import EVALUATING, keep_given_options
from seqcls.run.checks.command_line import (
    OneLineErrorParser,
    check_config_files,
    check_monitor_directions,
    check_strategy,
    describe_options,
)
from seqcls.run.checks.flag_values import keep_comment_like_values
from seqcls.run.checks.linked_options import check_linked_options, linked_options
from seqcls.run.checks.parsed import check_parsed
from seqcls.run.fit.no_steps_left import already_finished
from seqcls.run.fit.recipe import MAX_EPOCHS, Unset
from seqcls.run.fit.validation_off import validation_off_by
from seqcls.run.layout import DEFAULT_ROOT, check_folders, run_layout
from seqcls.run.outputs.fit_end import announce_already_finished, end_fit
from seqcls.run.outputs.logs import tensorboard_logger
from seqcls.run.outputs.quiet import without_load_report
from seqcls.run.outputs.run_config import CONFIG_FILE, SaveRunConfig
from seqcls.run.stops.early_stopping import early_stopping
from seqcls.run.stops.lost_peers import PeerWatch
from seqcls.run.stops.signals import release_signals


class RunCLI(LightningCLI):
    command = "seqcls"  # how the command is typed, for the model card's reproduce line
    pipeline_tag = "text-classification"  # what model/ does, for the model card
    description = "seqcls: fine-tune a Hugging Face sequence classifier with PyTorch Lightning."
    # Trainer defaults of this command over OPTIONS'; max_epochs None lets run/fit/recipe.py derive
    # the length of training from the data (see derives_training_length).
    command_trainer_defaults: ClassVar[dict[str, Any]] = {}
    # --help (and docs/configuration.md) text of Trainer options whose Lightning text is wrong here.
    trainer_help: ClassVar[dict[str, str]] = {}
    derives_training_length = False
    unset: Unset | None = None  # which length and validation flags the recipe decides
    already_finished = False  # fit: the run it continues had finished (fit/no_steps_left.py)
    # The model options validate, test and predict apply over a checkpoint's saved ones
    # (run/checks/checkpoint_options.py); any other given with another value is refused.
    evaluation_options: ClassVar[tuple[str, ...]] = ("cpu_matmul_precision",)
    # Those fit applies over a --ckpt_path it continues: how the same network trains and runs.
    continued_fit_options: ClassVar[tuple[str, ...]] = ("cpu_matmul_precision",)
    argv: tuple[str, ...] = ()  # the command line as given, when it was one

    def add_arguments_to_parser(self, parser: LightningArgumentParser) -> None:
        describe_options(parser, self.trainer_help)
        add_callback_options(parser)
        parser.link_arguments("model.model_name_or_path", "data.tokenizer_name_or_path")
        self.link_data_and_model(parser)

    def link_data_and_model(self, parser: LightningArgumentParser) -> None:
        """What the model learns from the data besides the tokenizer; nothing by default."""

    def parse_arguments(self, parser: LightningArgumentParser, args: ArgsType) -> None:
        argv = sys.argv[1:] if args is None else args
        if isinstance(argv, list | tuple):
            self.argv = tuple(str(arg) for arg in argv)
            check_config_files(self.argv)
            # A linked option given by hand: jsonargparse's message would blame its value.
            check_linked_options(self.argv, linked_options(parser))
        super().parse_arguments(parser, args)
        if isinstance(argv, list | tuple):
            # e.g. --data.text_pair_column "#2 String", which YAML reads as a comment
            keep_comment_like_values(self.config, argv)

    def _parse_ckpt_path(self) -> None:
        # Lightning reads a local checkpoint's hyper-parameters here, before any check of
        # seqcls's: a file that is not a checkpoint would end in a traceback.
        subcommand = self.config.get("subcommand")
        ckpt_path = self.config[subcommand].get("ckpt_path") if subcommand else None
        if not (ckpt_path and os.path.isfile(ckpt_path)):
            return super()._parse_ckpt_path()
        check_loads(ckpt_path)
        given = self.config[subcommand].model.clone()
        super()._parse_ckpt_path()  # the checkpoint's options over the command line's
        if subcommand in (*EVALUATING, "fit"):
            saved = self.config[subcommand].model
            options = self.evaluation_options
            if subcommand == "fit":
                options = self.continued_fit_options
            keep_given_options(
                given, saved, self.argv, options, subcommand=subcommand, ckpt_path=ckpt_path
            )

    def before_instantiate_classes(self) -> None:
        # Tokens named by SEQCLS_SECRET_* variables, before anything loads from the hub.
        apply_secrets()
        config = self._config()
        check_parsed(config, self.subcommand)
        if "weights_only" in config and config.weights_only is None:
            config.weights_only = True  # a checkpoint is data: loading it must not run code
        # The run's folders: the flags, else Vertex AI's AIP_* folders, else runs/default.
        self.layout = run_layout(config.trainer.default_root_dir, config.checkpoint.dirpath)
        config.trainer.default_root_dir = self.layout.root
        check_folders(self.layout)
        check_run_buckets(self.layout)  # before start_point lists the checkpoints there
        # --checkpoint.dirpath stays as given: config.yaml is stacked into other runs' configs.
        check_strategy(config.trainer.get("strategy"), self.layout.root)
        # Kept until the process exits: Lightning loads the checkpoint inside the run.
        self._downloads = tempfile.TemporaryDirectory(prefix="seqcls-ckpt-")
        # fit without --ckpt_path continues the run directory's newest complete checkpoint.
        self.start = start_point(
            config.get("ckpt_path"),
            self.layout.checkpoints,
            Path(self._downloads.name),
            automatic=self.subcommand == "fit",
        )
        self.ckpt_path = self.start.local
        model = config.get("model", {}).get("model_name_or_path")
        if self.subcommand == "fit":
            self.already_finished = already_finished(
                self.start, self.layout, CONFIG_FILE, config.trainer
            )
        # A fit that ended again after its export was cut saved its last state one epoch on.
        if not self.already_finished:
            check_continues(self.start, config.trainer.get("max_epochs"), model)
        self.unset = Unset.of(config.trainer) if self.derives_training_length else None
        # Built now, so that a bad --last_checkpoint.* stops the run before any work.
        self.last_checkpoint = LastCheckpoint(
            self.layout.checkpoints, **config.last_checkpoint.as_dict()
        )
        # On Vertex AI, CLUSTER_SPEC says which node this is and how many there are.
        cluster = apply_vertex_cluster()
        if cluster is not None:
            config.trainer.num_nodes = cluster_num_nodes(cluster, config.trainer.num_nodes)

    def instantiate_classes(self) -> None:
        # A checkpoint's weights replace the model folder's: its load report would say the
        # label layer is new and untrained.
        with without_load_report() if self.start.source else nullcontext():
            super().instantiate_classes()

    def after_instantiate_classes(self) -> None:
        super().after_instantiate_classes()
        if self.subcommand and "ckpt_path" in self.config_init[self.subcommand]:
            # Only what runs gets the resolved file; config.yaml keeps --ckpt_path as given.
            self.config_init[self.subcommand].ckpt_path = self.ckpt_path
        # Now that the data has named the labels, and before config.yaml is written.
        check_built(
            self.subcommand, self.start, self.ckpt_path, self.model, self.datamodule, self._config()
        )

    def instantiate_trainer(self, **kwargs: Any) -> Trainer:
        config = {**self._get(self.config_init, "trainer", default={}), **kwargs}
        if config.get("logger") in (None, True):
            config["logger"] = tensorboard_logger(self.layout.logs)
        given = list(config.get("callbacks") or [])  # --trainer.callbacks, by hand
        logs = config["logger"] is not False
        callbacks = run_callbacks(self.subcommand, self.layout, self.start, self.unset, given, logs)
        if self.subcommand == "fit" and self.unset is not None and self.unset.length:
            # The recipe sets the number at setup. Left unset, Lightning would warn that it
            # trains 1,000 epochs, which no run does.
            config["max_epochs"] = MAX_EPOCHS
        # The configurable best-checkpoint callback (--checkpoint.*), plus last.ckpt; both
        # are left out when checkpointing is switched off, which Lightning would reject.
        keys = self._parser(self.subcommand).callback_keys
        configured = [self._get(self.config_init, key) for key in keys]
        best = self._best_checkpoint()
        # A run directory moved since its checkpoints were saved: they are read where it is now.
        best.own_run = self.last_checkpoint.own_run = self.start.own
        if config.get("enable_checkpointing") is not False:
            callbacks += [best, self.last_checkpoint]
        if self.subcommand == "fit":
            options = self._config()
            off_by = validation_off_by(options)
            stop = early_stopping(
                options.early_stopping, best.monitor, best.mode, validation_off_by=off_by
            )
            callbacks += [stop] if stop is not None else []
        # Built here, so the watch covers every subcommand's distributed run.
        callbacks.append(PeerWatch(**self._config().peers.as_dict()))
        check_monitor_directions([*given, *configured])
        config["callbacks"] = callbacks
        # Checkpoints written whole, and the one this run resumed from never pruned.
        config["plugins"] = with_atomic_io(config.get("plugins"), keep=self.start.source)
        return self._instantiate_trainer(config, configured)

    def _best_checkpoint(self) -> BestCheckpoint:
        """The --checkpoint.* callback, monitoring what the data names unless told otherwise."""
        config = self._config()
        monitor = self.datamodule.monitor if isinstance(self.datamodule, TextDataModule) else None
        options = {**config.checkpoint.as_dict(), "dirpath": self.layout.checkpoints}
        return configured_best_checkpoint(
            options, monitor, config.trainer.get("val_check_interval")
        )

    def _run_subcommand(self, subcommand: str) -> None:
        # A write the disk or bucket refused anywhere in the run (logs, report, export) ends
        # in one line naming the run directory; checkpoints and text files name their own.
        with writing(self.layout.root, under=True):
            super()._run_subcommand(subcommand)

    def before_fit(self) -> None:
        self._fit_started = time.monotonic()

    def fit(self, **kwargs: Any) -> None:
        """``Trainer.fit``, unless the run has finished: then it is left as it is."""
        if not self.already_finished:
            try:
                self.trainer.fit(**kwargs)
            except BaseException:
                release_signals()
                raise
        elif self.trainer.is_global_zero:
            announce_already_finished(self.start.step)

    def after_fit(self) -> None:
        try:
            if self.trainer.is_global_zero and not self.already_finished:
                end_fit(
                    self.trainer,
                    self.layout.model,
                    self._config(),
                    dict(self.model.hparams),
                    command=f"{self.command} fit",
                    pipeline_tag=self.pipeline_tag,
                    started=self._fit_started,
                    seen_rows=getattr(self.datamodule, "seen_rows", None),
                )
        finally:
            release_signals()

    def _config(self) -> Namespace:
        return self.config[self.subcommand] if self.subcommand else self.config

    def init_parser(self, **kwargs: Any) -> LightningArgumentParser:
        self.parser_class = OneLineErrorParser  # errors as one line (checks/command_line.py)
        # The top of --help (a subcommand's parser gets its own description from Lightning).
        kwargs.setdefault("description", self.description)
        # Usage lines read "seqcls mlm fit ...", not the name of the script that started us
        # (argparse's default, which for seqcls mlm lacks the mlm).
        kwargs.setdefault("prog", self.command)
        return super().init_parser(**kwargs)


# What every seqcls command passes to its RunCLI besides model and data.
OPTIONS: dict[str, Any] = {
    "save_config_callback": SaveRunConfig,
    "save_config_kwargs": {"overwrite": True},
    "trainer_defaults": {
        "default_root_dir": DEFAULT_ROOT,
        # Lightning's own default is 1000 epochs; fine-tuning wants a few.
        "max_epochs": 3,
        "log_every_n_steps": 10,
    },
    "seed_everything_default": DEFAULT_SEED,
}


def run_cli(
    cli_class: type[RunCLI],
    model_class: type[LightningModule],
    datamodule_class: type[TextDataModule],
    args: Any,
    run: bool,
) -> Any:
    """Build ``cli_class`` with the shared options: parse, instantiate and (with run) run."""
    return cli_class(model_class, datamodule_class, args=args, run=run, **options_of(cli_class))


def options_of(cli_class: type[RunCLI]) -> dict[str, Any]:
    """What ``cli_class`` is built with: the shared options, and its own Trainer defaults."""
    trainer_defaults = OPTIONS["trainer_defaults"] | cli_class.command_trainer_defaults
    return OPTIONS | {"trainer_defaults": trainer_defaults}
