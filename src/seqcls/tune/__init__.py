"""Hyper-parameter search: ``seqcls tune`` (Optuna) and its Vertex AI form.

``space`` reads the search-space YAML; ``trial`` runs one ``seqcls fit`` and reports its
validations; ``study`` keeps the study (SQLite) in the run directory; ``outputs`` writes
best.yaml, the trials table and the importance plot; ``seeds`` re-fits the best parameters
with other seeds; ``options`` holds the ``--tune.*`` options; ``command`` is the subcommand;
``vertex`` turns the space into a Vertex AI tuning job's parameters.
"""
