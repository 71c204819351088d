"""The classifier: pretrained loading, the LightningModule, its metrics, optimiser and speed-ups.

``pretrained`` loads any Hugging Face model in training mode; ``optimization`` is the one
AdamW-with-warm-up path every module trains with; ``classifier`` is the LightningModule;
``metrics`` builds the torchmetrics the data names; ``first_token`` and ``xla_attention``
change how the encoder computes, never what.
"""
