"""The classifier: pretrained loading, the LightningModule, its metrics and optimiser.

``pretrained`` loads any Hugging Face model in training mode; ``network`` builds what a
classifier trains from its options; ``classifier`` is the LightningModule, with its
evaluation steps in ``evaluation_steps``; ``optimization`` is the one AdamW-with-warm-up path
every module trains with; ``metrics`` builds the torchmetrics the data names;
``packed_forward``, ``first_token`` and ``mean_pooling`` change how the encoder computes, never
what. The speed-ups each device takes live apart, in ``seqcls.speedups``.
"""
