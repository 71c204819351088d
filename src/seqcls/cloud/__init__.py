"""Google Cloud: files on local disk or ``gs://`` (``storage``), and Vertex AI's environment
(``vertex``: ``CLUSTER_SPEC`` and the ``AIP_*`` folders)."""
