"""Which model names are local paths, and the existing path a mistyped one was meant to be."""

from pathlib import Path

import pytest

from seqcls.errors import closest_existing_path, names_a_local_path


def test_paths_and_hub_ids_are_told_apart(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.chdir(tmp_path)
    (tmp_path / "models").mkdir()
    assert names_a_local_path("./model")
    assert names_a_local_path("/srv/model")
    assert names_a_local_path("runs/quickstart/model")
    assert names_a_local_path("models/mine")  # owner/name in form, but models/ is a folder here
    assert not names_a_local_path("FacebookAI/roberta-base")
    assert not names_a_local_path("bert-base-uncased")


def test_the_closest_existing_path_follows_the_folders_that_exist(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.chdir(tmp_path)
    (tmp_path / "runs" / "quickstart" / "model").mkdir(parents=True)
    (tmp_path / "runs" / "other").mkdir()
    # One part mistyped: the whole path, where the rest of it exists below the match.
    assert closest_existing_path("runs/quickstrat/model") == "runs/quickstart/model"
    assert closest_existing_path("runs/quickstart/modle") == "runs/quickstart/model"
    # The rest does not exist: the match, where the fix starts.
    assert closest_existing_path("runs/quickstrat/models") == "runs/quickstart"
    absolute = closest_existing_path(str(tmp_path / "rnus" / "other"))
    assert absolute == str(tmp_path / "runs" / "other")
    # Nothing close: no guess.
    assert closest_existing_path("runs/zzzzzz") is None
    assert closest_existing_path("nothing/here") is None
