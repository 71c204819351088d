"""``seqcls mlm``: the same command, run directory and trainer configs, for masked-LM pretraining.

``seqcls mlm fit`` continues pretraining a model on unlabelled text; its ``model/`` folder is
a masked-LM directory that ``seqcls fit --model.model_name_or_path RUN/model`` fine-tunes.
A sibling command rather than a ``--model.class_path`` switch: LightningCLI's subclass mode
would make every classifier config and flag spell ``class_path``/``init_args``.
"""

from pytorch_lightning.cli import ArgsType, LightningArgumentParser, LightningCLI

from seqcls.mlm.corpus import TextCorpusDataModule
from seqcls.mlm.model import MaskedLanguageModel
from seqcls.run.command import RunCLI, run_cli


class MaskedLMCLI(RunCLI):
    command = "seqcls mlm"
    pipeline_tag = "fill-mask"  # its model/ is a masked LM, for the model card
    description = (
        "seqcls mlm: continue masked-LM pretraining on unlabelled text; "
        "seqcls fit then fine-tunes its model/."
    )

    @staticmethod
    def subcommands() -> dict[str, set[str]]:
        # Nothing to predict: a masked LM's output is its model/ folder.
        return {
            name: keys for name, keys in LightningCLI.subcommands().items() if name != "predict"
        }

    def link_data_and_model(self, parser: LightningArgumentParser) -> None:
        # The best checkpoint (and so model/) has the lowest dev perplexity; a parser default,
        # so that --print_config shows it.
        parser.set_defaults({"checkpoint.monitor": "val/perplexity", "checkpoint.mode": "min"})


def make_mlm_cli(args: ArgsType = None, *, run: bool = True) -> MaskedLMCLI:
    """Parse ``args`` of ``seqcls mlm``, build model, data and trainer, and run the subcommand."""
    cli: MaskedLMCLI = run_cli(MaskedLMCLI, MaskedLanguageModel, TextCorpusDataModule, args, run)
    return cli
