"""``RUN/config.yaml``: the resolved ``fit`` config, enough to reproduce the run."""

import os
from typing import Any

from pytorch_lightning import Trainer
from pytorch_lightning.cli import SaveConfigCallback

from seqcls.cloud.storage import write_text
from seqcls.data.base import TextDataModule
from seqcls.run.outputs.redact import redact_config

CONFIG_FILE = "config.yaml"


class SaveRunConfig(SaveConfigCallback):
    """Write the resolved ``fit`` config, with what the data decided, to ``RUN/config.yaml``.

    Only ``fit`` writes it: ``validate``/``test``/``predict`` usually read that same file
    with ``--config`` and must not replace it. Re-running ``fit`` in the same run
    directory overwrites it.
    """

    def setup(self, trainer: Trainer, pl_module: Any, stage: str) -> None:
        if stage != "fit" or self.already_saved:
            return
        datamodule = getattr(trainer, "datamodule", None)
        if trainer.is_global_zero:
            if isinstance(datamodule, TextDataModule):
                # Recorded, so that later commands need not read the data to know them.
                for key, value in datamodule.derived_config().items():
                    self.config.data[key] = value
            path = os.path.join(trainer.default_root_dir, CONFIG_FILE)
            # Keys and tokens given as flags stay out of a file that is shared and copied.
            write_text(path, self.parser.dump(redact_config(self.config), skip_unset=False))
        self.already_saved = True
