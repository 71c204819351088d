"""MaskedLanguageModel: continue pretraining any AutoModelForMaskedLM on your own text."""

from typing import Any

import pytorch_lightning as pl
import torch
from transformers import AutoModelForMaskedLM

from seqcls.hardware import is_xla, on_cpu, on_cuda
from seqcls.mlm.pooler import pretrained_pooler
from seqcls.model.metrics import WeightedMean
from seqcls.model.optimization import adamw_with_warmup
from seqcls.model.pretrained import load_for_training
from seqcls.speedups.cpu_dropout import use_cpu_dropout
from seqcls.speedups.device_mask import use_device_side_attention_mask
from seqcls.speedups.matmul_precision import (
    CpuMatmulPrecision,
    MatmulPrecision,
    keep_attention_in_mkl,
)

Batch = dict[str, torch.Tensor]
IGNORED = -100  # the label of every token the loss skips (not masked)


class Perplexity(WeightedMean):
    """exp of the mean loss per masked token, over every masked token seen (synced as sums)."""

    def compute(self) -> torch.Tensor:
        return super().compute().exp()


class MaskedLanguageModel(pl.LightningModule):
    def __init__(
        self,
        model_name_or_path: str,
        learning_rate: float = 5e-5,
        weight_decay: float = 0.01,
        warmup_ratio: float = 0.06,
        gradient_checkpointing: bool = False,
        fast_cpu_dropout: bool = True,
        cpu_matmul_precision: CpuMatmulPrecision = "auto",
    ) -> None:
        """A pretrained encoder with its masked-LM head (a fresh head where the model has none).

        Its ``model/`` export is what ``seqcls fit --model.model_name_or_path`` takes.

        Args:
            model_name_or_path: Hub id, or local or ``gs://`` directory of a pretrained model.
            learning_rate: Peak AdamW learning rate, reached after warm-up.
            weight_decay: AdamW weight decay for weight matrices; biases and norms get none.
            warmup_ratio: Fraction of all optimizer steps spent warming the learning rate up
                from 0; afterwards it decays linearly to 0.
            gradient_checkpointing: Recompute activations in the backward pass instead of
                keeping them: about a third slower, much less memory.
            fast_cpu_dropout: Training on CPU, draw dropout masks from numpy's SFC64
                generator seeded by torch's, as ``seqcls fit`` does (``cpu_dropout.py``).
                False: torch's dropout. No effect on other devices.
            cpu_matmul_precision: torch's matmul precision while this run trains or scores
                on a CPU in fp32, as for ``seqcls fit`` (``matmul_precision.py``): ``auto``
                sends fp32 products to oneDNN where it keeps them fp32.
        """
        super().__init__()
        self.save_hyperparameters()
        self.learning_rate, self.weight_decay = learning_rate, weight_decay
        self.warmup_ratio = warmup_ratio
        self.model = load_for_training(
            AutoModelForMaskedLM, model_name_or_path, gradient_checkpointing=gradient_checkpointing
        )
        # Exported with model/ (run/outputs/export.py), kept out of the checkpoints: the pretrained
        # pooler that the masked LM leaves out and that seqcls fit's head reads (mlm/pooler.py).
        self.carried_weights = pretrained_pooler(self.model, model_name_or_path)
        self.val_loss, self.val_perplexity = WeightedMean(), Perplexity()
        self.test_loss, self.test_perplexity = WeightedMean(), Perplexity()

    def setup(self, stage: str) -> None:
        if is_xla(self.trainer) or on_cuda(self.trainer):  # no host sync in a forward pass
            use_device_side_attention_mask(self.model)
        elif on_cpu(self.trainer):
            keep_attention_in_mkl(self.model)
            if stage == "fit" and self.hparams["fast_cpu_dropout"]:
                use_cpu_dropout(self.model)

    def configure_callbacks(self) -> list[pl.Callback]:
        # torch's matmul precision for this run's CPU products, put back however it ends.
        return [MatmulPrecision(self.hparams["cpu_matmul_precision"])]

    def forward(self, batch: Batch) -> Any:
        return self.model(**batch)

    def training_step(self, batch: Batch, batch_idx: int) -> torch.Tensor:
        loss: torch.Tensor = self(batch).loss
        # Read back at log steps only (run/fit/progress_loss.py puts it in the progress bar).
        self.log("train/loss", loss, batch_size=len(batch["labels"]))
        return loss

    def validation_step(self, batch: Batch, batch_idx: int) -> None:
        self._evaluate(batch, "val", self.val_loss, self.val_perplexity)

    def test_step(self, batch: Batch, batch_idx: int) -> None:
        self._evaluate(batch, "test", self.test_loss, self.test_perplexity)

    def _evaluate(
        self, batch: Batch, prefix: str, loss: WeightedMean, perplexity: Perplexity
    ) -> None:
        # Weighted by masked tokens, counted on the device: the exact per-token mean under
        # DDP and over batches that mask different numbers of tokens, with no host sync.
        masked = (batch["labels"] != IGNORED).sum()
        mean = self(batch).loss
        # A batch with no masked token has no loss (0/0, NaN) and weighs nothing: counted as 0.
        # Any other NaN is a diverged model's, and must reach the metrics as NaN.
        mean = torch.where(masked > 0, mean, torch.zeros_like(mean))
        loss.update(mean, weight=masked)
        perplexity.update(mean, weight=masked)
        size = len(batch["labels"])
        self.log(f"{prefix}/loss", loss, batch_size=size)
        self.log(f"{prefix}/perplexity", perplexity, batch_size=size, prog_bar=True)

    def configure_optimizers(self) -> Any:
        return adamw_with_warmup(self, self.learning_rate, self.weight_decay, self.warmup_ratio)
