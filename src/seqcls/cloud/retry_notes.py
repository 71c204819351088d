"""gcsfs's retries of a bucket's transient answers, said once in a run's log.

gcsfs retries every request itself (``gcsfs/retry.py``): 408, 429 and 500 to 504 answers, a
dropped connection and an expired token, six tries in all with backoff of 1, 2, 4, 8 and 16 s
(plus up to 1 s of jitter each), so about 31 to 36 s at most before the error reaches
seqcls. That bound is short enough for a run, so seqcls adds no retries of its own. gcsfs
logs each retry at DEBUG, where no one sees it, and the last failure with a traceback at
ERROR; here the first retry of each kind of answer is said in one WARNING line, and the
traceback is left out, as the run reports that failure in its own line
(``write_faults.py``).
"""

import logging

_GCSFS = "gcsfs"
_RETRYING = "retrying after exception:"
_GAVE_UP = ("out of retries on exception:", "non-retriable exception:")
log = logging.getLogger(__name__)


class SayRetriesOnce(logging.Filter):
    """On gcsfs's logger: its retries said once per kind of answer, its own lines dropped."""

    def __init__(self) -> None:
        super().__init__()
        self.said: set[str] = set()

    def filter(self, record: logging.LogRecord) -> bool:
        message = record.getMessage()
        if _RETRYING in message:
            answer = message.split(_RETRYING, 1)[1].strip().splitlines()[0] or "no answer"
            kind = answer.rsplit(",", 1)[-1].strip()  # "Service Unavailable, 503": 503
            if kind not in self.said:
                self.said.add(kind)
                log.warning(
                    "The bucket answered %s; retrying with backoff (gcsfs: 6 tries within "
                    "about 35 s), and saying this once",
                    answer,
                )
            return False
        if any(words in message for words in _GAVE_UP):
            return False  # the run's own line says what failed, without the traceback
        return record.levelno >= logging.WARNING


def say_retries_once() -> None:
    """Install the filter on gcsfs's logger (once per process), which must pass DEBUG
    records for the retries to reach it."""
    logger = logging.getLogger(_GCSFS)
    if any(isinstance(f, SayRetriesOnce) for f in logger.filters):
        return
    logger.addFilter(SayRetriesOnce())
    logger.setLevel(logging.DEBUG)
