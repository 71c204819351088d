"""SequenceClassifier: any AutoModelForSequenceClassification as a LightningModule."""

from typing import Any

import pytorch_lightning as pl
import torch

from seqcls.data.columns import INDEX
from seqcls.data.labels import LabelSpace, ProblemType
from seqcls.data.metric_names import metric_names
from seqcls.data.packing import examples_in, is_packed
from seqcls.data.sub_batches import Batch, BatchOrPieces, pieces_of
from seqcls.data.windows import WindowPooling
from seqcls.errors import ConfigurationError
from seqcls.model.calibration import Calibration
from seqcls.model.captured_step import CapturesSteps, Compile, refuse_uncapturable
from seqcls.model.evaluation_steps import EvaluationSteps
from seqcls.model.lora import add_lora, hold_base_in_bf16
from seqcls.model.loss import (
    ClassWeights,
    balanced_weights,
    check_loss_options,
    listed_weights,
    training_loss,
)
from seqcls.model.mean_pooling import Pooling
from seqcls.model.memory import MemoryEstimate
from seqcls.model.network import build_network
from seqcls.model.optimization import adamw_with_warmup
from seqcls.model.packed_forward import PackedForward, PackingAnswers
from seqcls.model.pair_encoding import PairEncoding, forward_pairs
from seqcls.model.rdrop import rdrop_loss
from seqcls.speedups.device_setup import set_up_for_device
from seqcls.speedups.matmul_precision import CpuMatmulPrecision, MatmulPrecision


class SequenceClassifier(CapturesSteps, PackingAnswers, EvaluationSteps, pl.LightningModule):
    def __init__(
        self,
        model_name_or_path: str,
        label_names: list[str] | None = None,
        problem_type: ProblemType = "single_label_classification",
        metrics: list[str] | None = None,
        validation_names: list[str] | None = None,
        learning_rate: float | None = None,
        weight_decay: float = 0.01,
        warmup_ratio: float = 0.1,
        head_learning_rate: float | None = None,
        layer_lr_decay: float = 1.0,
        reinit_layers: int | None = None,
        adam_betas: tuple[float, float] = (0.9, 0.999),
        adam_epsilon: float = 1e-8,
        class_weights: ClassWeights = None,
        label_smoothing: float = 0.0,
        rdrop_alpha: float = 0.0,
        dropout: float | None = None,
        threshold: float = 0.5,
        calibrate: bool = True,
        gradient_checkpointing: bool = False,
        compile: Compile = False,
        fast_cpu_dropout: bool = True,
        cpu_matmul_precision: CpuMatmulPrecision = "auto",
        embedding_rows: bool = True,
        pooling: Pooling | None = None,
        last_layer_first_token_only: bool | None = None,
        window_pooling: WindowPooling | None = None,
        pair_encoding: PairEncoding | None = None,
        lora_rank: int = 0,
        lora_alpha: int = 16,
        lora_dropout: float = 0.0,
        lora_target_modules: list[str] | None = None,
    ) -> None:
        """A pretrained encoder with a fresh classification or regression head.

        Args:
            model_name_or_path: Hub id, or local or ``gs://`` directory of a pretrained model,
                encoder or decoder (docs/models.md).
            label_names: Label names in id order; filled in from the data.
            problem_type: Filled in from the data.
            metrics: Metric names; filled in from the data.
            validation_names: One name per validation set; filled in from the data.
            learning_rate: Peak AdamW learning rate, reached after warm-up. Unset: 5e-5,
                or 1e-4 for regression, which measured better there (docs/results.md).
            weight_decay: AdamW weight decay for weight matrices; biases and norms get none.
            warmup_ratio: Fraction of all optimizer steps spent warming the learning rate up
                from 0; afterwards it decays linearly to 0.
            head_learning_rate: Peak learning rate of what starts untrained: the new head and
                the layers ``reinit_layers`` draws afresh. Unset: twice ``learning_rate`` where
                layers are drawn afresh (docs/results.md); else ``learning_rate``.
            layer_lr_decay: Layer-wise learning-rate decay: the top encoder layer trains at
                ``learning_rate``, each layer below at this factor times the one above, the
                embeddings last. 1: every layer alike.
            reinit_layers: Re-initialise the top N encoder layers (and the pooler, where the
                model has one) before training, instead of starting them from their
                pretrained weights (Zhang et al. 2021). 0: none. Unset: 1 where the model
                starts from a pretrained encoder (no classification head in the checkpoint)
                and its head reads the first token (not a decoder); else 0 (docs/results.md).
            adam_betas: AdamW's decay rates of its first and second moment estimates.
            adam_epsilon: AdamW's epsilon, added to the root of the second moment.
            class_weights: Single-label only: weigh each label's rows in the training loss.
                ``auto``: by inverse frequency among the training rows, so that every label
                counts as much as if they were balanced; or one weight per label, in label id
                order. Unset: every row alike. Evaluation losses are never weighted.
            label_smoothing: Single-label only: train towards ``1 - label_smoothing`` on the
                true label and the rest spread evenly over all labels (as
                ``torch.nn.CrossEntropyLoss`` defines it). 0: none.
            rdrop_alpha: Single-label only: R-Drop (Liang et al. 2021). Each training row is
                scored twice under two dropout masks, and this weighs the symmetric KL
                divergence between the two predictions added to their mean cross-entropy.
                A training step costs twice as much. 0: off (``rdrop.py``).
            dropout: The rate of every dropout of the model: its layers' outputs, attention
                and the classification head's input (set on the model's config as it is
                built, under each architecture's names). Unset: 0, no dropout, which measured
                better on MRPC and CoLA, level on STS-B and a point worse on RTE
                (docs/results.md#dropout-off); with ``rdrop_alpha``, which needs dropout's
                masks, the checkpoint's own. 0.1 is BERT's, RoBERTa's and MiniLM's own rate.
                Saved in the exported model's config.
            threshold: Multi-label only: a label is predicted when its probability reaches this
                (unless ``calibrate`` tuned one per label).
            calibrate: After fit, fit on the validation rows a temperature (single-label: the
                logits are divided by it, so that probabilities match frequencies) or one
                decision threshold per label (multi-label: the best F1 of each). They are
                saved with the exported model and applied by predict, validate and test.
                False: scores and decisions are the network's own, whatever was saved
                (see docs/evaluation.md).
            gradient_checkpointing: Recompute activations in the backward pass instead of
                keeping them: about a third slower, much less memory (large models on
                small GPUs).
            compile: ``true``: ``torch.compile`` the model (dynamic shapes; docs/benchmarks.md).
                ``captured``: fixed shapes, the whole step compiled once (``captured_step.py``).
                false (the eager step) stays the default until the others measure faster on a GPU.
            fast_cpu_dropout: Training on CPU, draw dropout masks (attention dropout too)
                from numpy's SFC64 generator seeded by torch's: the same Bernoulli masks'
                law, about half the cost of torch's own CPU dropout (``cpu_dropout.py``).
                False: torch's dropout. No effect on other devices or when compiling.
            cpu_matmul_precision: torch's matmul precision while this run trains or scores
                on a CPU in fp32 (``32-true``). ``auto``: ``medium`` where the CPU has bf16
                dot products (AVX512-BF16 or AMX) and oneDNN keeps fp32 products fp32 at
                ``medium``, as on AMD EPYCs, at up to twice MKL's rate; elsewhere (with AMX,
                which rounds inputs to bf16) torch's own. ``medium``: oneDNN's products
                whatever they do, bf16 inputs with AMX. ``highest``: MKL's fp32 products, as
                torch does by default (see docs/hardware.md).
            embedding_rows: Training in one process on a CPU, give the word embeddings the
                gradient of the rows a batch looks up, and update them by those rows
                (``row_sparse_adamw.py``): torch's AdamW's weights and saved state, faster.
                False: a dense gradient and torch's AdamW on every row (for a callback that
                reads that gradient). No effect elsewhere (docs/hardware.md).
            pooling: What the head reads of each row. ``first_token``: the first token, as
                ``AutoModelForSequenceClassification`` does (a decoder's head: the last token).
                ``mean``: the mean of the row's tokens, as sentence encoders were trained, where
                a check shows the head reads one token of an encoder's output (BERT, RoBERTa,
                ELECTRA, DeBERTa and ALBERT families; docs/models.md). ``auto``: the
                checkpoint's own, read off its sentence-transformers files (mean for
                all-MiniLM-L6-v2), else the first token. Unset: what a model
                fine-tuned by seqcls was trained with, else the first token
                (docs/results.md#a-mean-pooled-head).
            last_layer_first_token_only: Compute the last encoder layer for the first token
                only, the one the classification head reads: the same loss and gradients with
                about an eighth fewer FLOPs on a 6-layer model. Unset: on where the last layer
                is laid out as BERT's and a check on random rows shows the cut keeps the
                logits (the BERT, RoBERTa, ELECTRA and DeBERTa families), off for other
                architectures and with mean pooling, whose head reads every token.
            window_pooling: Filled in from the data (``--data.window_stride``): evaluation
                and prediction pool each document's window logits this way. None: no windows.
            pair_encoding: Filled in from the data (``--data.pair_encoding``): ``separate``
                encodes each text of a pair alone and compares the two (``pair_encoding.py``).
                None: what the model was fine-tuned with, else joint.
            lora_rank: Train rank-R LoRA adapters through peft instead of every weight: the
                pretrained weights frozen (held in bf16 under ``bf16-mixed``), the head whole,
                checkpoints of what trains only (``lora.py``, docs/models.md). 0: full fine-tuning.
            lora_alpha: LoRA's scale numerator: an adapter's update is scaled by alpha / rank.
            lora_dropout: Dropout on the adapters' input.
            lora_target_modules: The layers that get adapters, by name (peft's matching). Unset:
                every Linear layer inside the encoder's or decoder's blocks.
        """
        super().__init__()
        refuse_uncapturable(compile, lora_rank, rdrop_alpha, pair_encoding, pooling)
        if not label_names:
            raise ConfigurationError("no label names: set --data.train_file or --data.label_names")
        # Not a hyper-parameter: Lightning would restore it from a checkpoint over the flag, and
        # --model.calibrate false must hold for predict, validate and test too.
        self.save_hyperparameters(ignore=["calibrate"])
        self.calibrate = calibrate
        self.labels = LabelSpace(problem_type, tuple(label_names))
        self.weight_decay, self.warmup_ratio, self.threshold = weight_decay, warmup_ratio, threshold
        check_loss_options(
            class_weights, label_smoothing, problem_type, len(label_names), rdrop_alpha
        )
        self.class_weights, self.label_smoothing = class_weights, label_smoothing
        self.rdrop_alpha = rdrop_alpha
        # Not saved: a list comes back from the hyper-parameters, auto from the data at fit.
        self.register_buffer("class_weight", listed_weights(class_weights), persistent=False)
        self.window_pooling = window_pooling
        # What predict applies on top of the logits: set after fit, or read from the run's
        # exported model (see run/report/evaluation_report.py); none until then.
        self.calibration: Calibration | None = None
        network = build_network(
            model_name_or_path,
            self.labels,
            dropout=dropout,
            rdrop=bool(rdrop_alpha),
            gradient_checkpointing=gradient_checkpointing,
            # Unset with LoRA: none, as frozen layers drawn afresh would stay random.
            reinit_layers=0 if lora_rank and reinit_layers is None else reinit_layers,
            learning_rate=learning_rate,
            head_learning_rate=head_learning_rate,
            pooling=pooling,
            last_layer_first_token_only=last_layer_first_token_only,
            pair_encoding=pair_encoding,
        )
        self.model, self.pairs = network.model, network.pairs
        # "new": an untrained label layer, which only a fit or a checkpoint makes useful.
        self.label_layer_source = network.head_source
        self.hparams.update(network.resolved)  # what trained, for the checkpoint and model card
        self.learning_rate = self.hparams["learning_rate"]
        lora = (lora_rank, lora_alpha, lora_dropout, lora_target_modules)
        self.lora = add_lora(self.model, *lora, reinit_layers=self.hparams["reinit_layers"])
        # Packed batches (several rows per model row) run packed where the model is served.
        self.packed_forward = PackedForward(self.model)
        if self.pairs is not None:
            self.packed_forward.run_unpacked()  # the data module packs no pairs
        self.set_up_metrics(metric_names(metrics, problem_type), validation_names or ["val"])

    def setup(self, stage: str) -> None:
        if stage == "fit" and self.class_weights == "auto":
            counts = self.trainer.datamodule.train_label_counts()  # type: ignore[attr-defined]
            self.class_weight = balanced_weights(counts)
        if stage == "fit" and self.pairs is not None:
            self.pairs.start(self.trainer.datamodule)  # type: ignore[attr-defined]
        rates = [self.hparams["learning_rate"], self.hparams.get("head_learning_rate")]
        set_up_for_device(
            self.trainer,
            self.model,
            self.packed_forward,
            stage=stage,
            compile=self.hparams["compile"],
            fast_cpu_dropout=self.hparams["fast_cpu_dropout"],
            pairs_apart=self.pairs is not None,
            learning_rates=[rate for rate in rates if rate is not None],
        )
        self.capture_step(stage, self.hparams["compile"])
        # After the device's checks, which run the model outside autocast.
        if self.lora is not None and str(self.trainer.precision).startswith("bf16"):
            hold_base_in_bf16(self.model)  # frozen: no update for bf16 to round away

    def configure_callbacks(self) -> list[pl.Callback]:
        # torch's matmul precision for this run's CPU products, put back however it ends;
        # what each training mode would need in memory, logged as the fit starts.
        return [MatmulPrecision(self.hparams["cpu_matmul_precision"]), MemoryEstimate()]

    def forward(self, batch: Batch) -> Any:
        if self.pairs is not None:
            return forward_pairs(self.model, batch, mean=self.pairs.pooling == "mean")
        if is_packed(batch):
            return (self.captured or self.packed_forward)(batch)
        inputs = {key: value for key, value in batch.items() if key != INDEX}
        return self.model(**inputs)

    def training_step(self, batch: BatchOrPieces, batch_idx: int) -> torch.Tensor:
        pieces = pieces_of(batch)
        rows = sum(examples_in(piece) for piece in pieces)
        weight, smoothing = self.class_weight, self.label_smoothing
        if self.captured is not None:
            loss = self.captured.loss(batch)  # type: ignore[arg-type]
        elif self.rdrop_alpha:
            loss = rdrop_loss(pieces, self, weight, smoothing, self.rdrop_alpha)
        else:
            loss = training_loss(pieces, self, self.labels.problem_type, weight, smoothing)
        # Read back at log steps only (run/fit/progress_loss.py puts it in the progress bar).
        self.log("train/loss", loss, batch_size=rows)
        return loss

    def configure_optimizers(self) -> Any:
        options = self.hparams
        return self.capture_optimizer(  # with the update compiled, if the step is
            adamw_with_warmup(
                self,
                self.learning_rate,
                self.weight_decay,
                self.warmup_ratio,
                betas=tuple(options["adam_betas"]),
                eps=options["adam_epsilon"],
                model=self.model,
                layer_lr_decay=options["layer_lr_decay"],
                head_learning_rate=options["head_learning_rate"],
                fresh_layers=options["reinit_layers"],
                embedding_rows=options["embedding_rows"],
                captured=self.captured is not None,
            )
        )
