"""The run directory and everything a run writes into it, plus the CLI base that wires them.

``command`` is ``RunCLI``, the LightningCLI every seqcls command builds on, and ``callbacks``
the callbacks it gives every run; ``layout`` decides the run's folders (flags, Vertex AI's
``AIP_*``, the default). Below them, imports run one way, from the top down:

- ``checks/``: mistakes in the command line, the configs and the built model, stopped early;
- ``report/``: the evaluation report, its calibration and the failed-run warning;
- ``fit/``: the callbacks that shape a fit: its length, its validations, its throughput;
- ``outputs/``: what a run writes: ``metrics.json``, predictions, ``config.yaml``, TensorBoard,
  the exported model and its card, and the lines it logs;
- ``checkpoints/``: saving checkpoints, and resuming from them;
- ``stops/``: a fit stopped before its end, by a signal, a non-finite loss or a stalled metric.
"""
