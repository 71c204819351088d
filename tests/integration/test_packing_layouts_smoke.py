"""benchmarks/packing_layouts.py runs every layout on the same batches, single texts and pairs."""

import ast
import re
from pathlib import Path
from typing import Any

import pytest
from benchmark_entry import load_benchmark

WORDS = ["my order", "arrived late again", "please cancel my plan today", "the parcel"]


def write_tsv(path: Path, kind: str, rows: int) -> str:
    lines = ["sentence\tlabel"] if kind == "single" else ["Quality\t#1 ID\t#2 ID\t#1\t#2"]
    for i in range(rows):
        text, other = WORDS[i % 4] * (1 + i % 3), WORDS[(i + 1) % 4]
        lines.append(
            f"{text}\t{i % 2}" if kind == "single" else f"{i % 2}\t{i}\t{i}\t{text}\t{other}"
        )
    path.write_text("\n".join(lines) + "\n")
    return str(path)


@pytest.mark.parametrize("kind", ["single", "pair"])
def test_every_layout_runs_on_the_same_batches(
    kind: str,
    tiny_bert: Path,
    tmp_path: Path,
    capsys: pytest.CaptureFixture[str],
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    from seqcls.speedups import segment_attention

    layouts = ["sub4", "pack64", "packbest", "costmodel", "onerow", "onerow1", "onerowsdpa"]
    monkeypatch.setenv("DROPOUT", "0")  # as a fit: short groups attend by explicit products
    explicit = segment_attention.explicit_attention
    at_once = segment_attention.attend_short_segments
    limits: dict[str, list[int]] = {"at once": [], "by group": []}

    def noting_the_limit(way: str, attend: Any) -> Any:
        def noted(*args: Any, **kwargs: Any) -> Any:
            limits[way].append(segment_attention.EXPLICIT_ATTENTION_MAX_LENGTH)
            return attend(*args, **kwargs)

        return noted

    monkeypatch.setattr(
        segment_attention, "explicit_attention", noting_the_limit("by group", explicit)
    )
    monkeypatch.setattr(
        segment_attention, "attend_short_segments", noting_the_limit("at once", at_once)
    )
    limit = segment_attention.EXPLICIT_ATTENTION_MAX_LENGTH
    load_benchmark("packing_layouts").main(
        str(tiny_bert), write_tsv(tmp_path / "train.tsv", kind, 96), kind, layouts, 3
    )
    # onerow and onerow1 take a layer's groups at once, onerowsdpa sends them to SDPA's
    # kernel; the limit is put back.
    assert limits["at once"]
    assert not limits["by group"]
    assert set(limits["at once"]) == {limit}
    assert limit == segment_attention.EXPLICIT_ATTENTION_MAX_LENGTH
    printed = capsys.readouterr().out
    for layout in layouts:
        assert re.search(rf"^{layout}: \d+ ms/step, \d+ examples/s", printed, re.MULTILINE)
    # Both cost-model layouts report one choice per batch: 3 batches.
    for layout in ("packbest", "costmodel"):
        (choices,) = re.findall(rf"^{layout} chose: (.*)$", printed, re.MULTILINE)
        assert sum(ast.literal_eval(choices).values()) == 3
