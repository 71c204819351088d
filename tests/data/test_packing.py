import random

import pytest
import torch

from seqcls.data.packing import (
    SEGMENT_IDS,
    SEGMENT_ROWS,
    SEGMENT_STARTS,
    is_packed,
    pack,
    pack_lengths,
    packed_layout,
    unpack,
)

PAD = 1


def features(lengths: list[int]) -> list[dict]:
    return [
        {
            "input_ids": [100 + 10 * row + column for column in range(length)],
            "token_type_ids": [column % 2 for column in range(length)],
            "labels": row % 3,
            "index": 40 + row,
        }
        for row, length in enumerate(lengths)
    ]


@pytest.mark.parametrize("seed", range(10))
def test_pack_lengths_places_every_row_once_within_the_row_length(seed: int) -> None:
    rng = random.Random(seed)
    lengths = [rng.randint(1, 30) for _ in range(rng.randint(1, 40))]
    bins = pack_lengths(lengths, 32)
    assert sorted(row for rows in bins for row in rows) == list(range(len(lengths)))
    assert all(sum(lengths[row] for row in rows) <= 32 for rows in bins)
    assert packed_layout(lengths, 32)[0] == len(bins)


def test_a_row_longer_than_the_row_length_gets_its_own() -> None:
    assert pack_lengths([50, 3, 3], 32) == [[0], [1, 2]]


def test_pack_lays_rows_end_to_end_with_restarting_positions_and_segments() -> None:
    batch = pack(features([3, 5, 2, 4]), 8, PAD)
    assert is_packed(batch)
    assert batch["input_ids"].shape == (2, 8)
    # Placed longest first: rows 1 (5) and 0 (3), rows 3 (4) and 2 (2) and 2 of padding;
    # within a model row in the batch's order.
    assert batch[SEGMENT_ROWS].tolist() == [0, 0, 1, 1]
    assert batch[SEGMENT_STARTS].tolist() == [0, 3, 0, 2]
    assert batch[SEGMENT_IDS].tolist() == [[1, 1, 1, 2, 2, 2, 2, 2], [1, 1, 2, 2, 2, 2, 0, 0]]
    assert batch["position_ids"].tolist() == [[0, 1, 2, 0, 1, 2, 3, 4], [0, 1, 0, 1, 2, 3, 0, 0]]
    assert batch["input_ids"][1].tolist() == [120, 121, 130, 131, 132, 133, PAD, PAD]
    assert batch["token_type_ids"][0].tolist() == [0, 1, 0, 0, 1, 0, 1, 0]
    assert batch["labels"].tolist() == [0, 1, 2, 0]  # one per row, in the batch's order
    assert batch["index"].tolist() == [40, 41, 42, 43]


def test_unpack_gives_back_the_padded_rows_in_order() -> None:
    rows = features([3, 5, 2, 4])
    unpacked = unpack(pack(rows, 8, PAD), PAD)
    assert unpacked["attention_mask"].sum(dim=1).tolist() == [3, 5, 2, 4]
    for row, feature in enumerate(rows):
        length = len(feature["input_ids"])
        assert unpacked["input_ids"][row, :length].tolist() == feature["input_ids"]
        assert unpacked["token_type_ids"][row, :length].tolist() == feature["token_type_ids"]
        assert (unpacked["input_ids"][row, length:] == PAD).all()
    assert torch.equal(unpacked["labels"], torch.tensor([0, 1, 2, 0]))
