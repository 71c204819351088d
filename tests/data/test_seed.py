"""One seed for the run: --seed_everything also seeds what the data module draws."""

from pathlib import Path

import pytest
from pytorch_lightning import seed_everything

from seqcls.data.classification import TextClassificationDataModule


@pytest.fixture
def make_data(tmp_path: Path, tiny_bert: Path):
    train = tmp_path / "train.csv"
    train.write_text("text,label\n" + "".join(f"row {i},{'ab'[i % 2]}\n" for i in range(40)))

    def make(**overrides: object) -> TextClassificationDataModule:
        return TextClassificationDataModule(
            train_file=str(train),
            tokenizer_name_or_path=str(tiny_bert),
            cache_dir=str(tmp_path / "cache"),
            validation_fraction=0.25,
            **overrides,  # type: ignore[arg-type]
        )

    return make


def held_out(data: TextClassificationDataModule) -> list[int]:
    data.setup("fit")
    (validation,) = data.splits["validation"]
    return list(validation["index"])


def test_seed_everything_chooses_the_held_out_rows(make_data) -> None:
    seed_everything(1)
    first = held_out(make_data())
    seed_everything(2)
    second = held_out(make_data())
    seed_everything(1)
    again = held_out(make_data())
    assert first != second
    assert first == again


def test_an_explicit_data_seed_wins_over_seed_everything(make_data) -> None:
    seed_everything(1)
    pinned = held_out(make_data(seed=7))
    seed_everything(2)
    assert held_out(make_data(seed=7)) == pinned
    assert make_data(seed=7).seed == 7
    assert make_data().seed == 2
