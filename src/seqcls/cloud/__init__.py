"""Google Cloud: files on local disk or ``gs://`` (``storage``), Vertex AI's environment
(``vertex``: ``CLUSTER_SPEC`` and the ``AIP_*`` folders) and tokens read from Secret Manager
when a job starts (``secrets``: ``SEQCLS_SECRET_*``)."""

import os

# gcsfs reads this on import, which fsspec defers to the first gs:// URL. Left true, gcsfs asks
# the Storage Control gRPC API for each bucket's layout, and where that API is unreachable (an
# emulator, a host without a route to it) each operation first waits 60 s for it to time out.
# The JSON API serves standard and hierarchical buckets; zonal buckets need it set to true.
os.environ.setdefault("GCSFS_EXPERIMENTAL_ZB_HNS_SUPPORT", "false")
