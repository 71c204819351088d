"""``remove_folder`` on gs://, through gcsfs on a local GCS emulator: a report folder written
again starts empty, wherever the run directory is (run/report/evaluation_report.py)."""

from collections.abc import Iterator

import fsspec
import pytest
from gcs_emulator import emulated_gcs, upload

import seqcls.data.tables  # noqa: F401  (sets gcsfs's options before fsspec loads it)
from seqcls.cloud.storage import exists, remove_folder

BUCKET = "seqcls-remove"


@pytest.fixture(scope="module")
def endpoint() -> Iterator[str]:
    with emulated_gcs(BUCKET) as url:
        yield url


def test_a_folder_goes_with_all_under_it_and_its_siblings_stay(endpoint: str) -> None:
    names = [
        "run/report/validate-last/validation_dev/per_class.csv",
        "run/report/validate-last/validation_dev/most_wrong.csv",
        "run/report/validate-last/validation/per_class.csv",
        "run/report/validate-last-2/validation/per_class.csv",  # its name starts the same
        "run/report/validation/per_class.csv",
    ]
    for name in names:
        upload(endpoint, BUCKET, name, b"label,f1\n")
    remove_folder(f"gs://{BUCKET}/run/report/validate-last")
    fs = fsspec.filesystem("gs")
    fs.invalidate_cache()
    left = sorted(path.removeprefix(f"{BUCKET}/") for path in fs.find(f"{BUCKET}/run"))
    assert left == sorted(names[3:])
    assert not exists(f"gs://{BUCKET}/run/report/validate-last")
    remove_folder(f"gs://{BUCKET}/run/report/never-written")  # nothing there: nothing to do
