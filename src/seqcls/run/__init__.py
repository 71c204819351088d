"""The run directory and everything a run writes into it, plus the CLI base that wires them.

``layout`` decides the folders (flags, Vertex AI's ``AIP_*``, the default); ``checkpoints``,
``zero_checkpoints`` and ``resume`` save and continue; ``signals`` stops cleanly on SIGTERM;
``outputs`` writes ``metrics.json`` and predictions; ``export`` the Hugging Face model; ``logs``
TensorBoard; ``throughput`` speed; ``redact`` keeps secrets out; ``config_checks`` stops bad
flags early; ``command`` is the LightningCLI subclass every seqcls command builds on.
"""
