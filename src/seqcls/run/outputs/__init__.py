"""What a run writes: its files in the run directory, and the lines it logs.

``metrics_file`` writes ``metrics.json`` however a fit ends, with ``evaluations`` placing
``validate`` and ``test`` results beside a fit's; ``predictions`` the predictions file;
``run_config`` ``config.yaml``, with ``redact`` keeping secrets out of it and the logs; ``logs``
TensorBoard; ``export`` the Hugging Face model, ``model_card`` its ``README.md``, which
``fit_end`` writes as a fit ends, with the fit's last lines; ``quiet`` keeps the libraries'
chatter out of the rest.
"""
