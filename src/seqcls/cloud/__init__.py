"""Google Cloud: files on local disk or ``gs://`` (``storage``), Vertex AI's environment
(``vertex``: ``CLUSTER_SPEC`` and the ``AIP_*`` folders) and tokens read from Secret Manager
when a job starts (``secrets``: ``SEQCLS_SECRET_*``)."""
