"""benchmarks/run.py start-up times each command as a fresh process, and reports medians and
ranges that follow from its runs."""

import json
import statistics
from pathlib import Path

import pytest
from benchmark_entry import load_benchmark, load_run


@pytest.mark.slow
def test_start_up_times_every_command_in_each_round(tmp_path: Path) -> None:
    json_path = tmp_path / "start-up.json"
    argv = ["start-up", "--repeat", "2", "--json", str(json_path)]
    report = load_run().main(argv)

    assert json.loads(json_path.read_text()) == json.loads(json.dumps(report))
    commands = report["commands"]
    assert list(commands) == list(load_benchmark("start_up").COMMANDS)
    for measured in commands.values():
        assert len(measured["runs"]) == 2
        assert all(seconds > 0 for seconds in measured["runs"])
        assert measured["seconds"] == pytest.approx(statistics.median(measured["runs"]))
        assert (measured["min_s"], measured["max_s"]) == (
            min(measured["runs"]),
            max(measured["runs"]),
        )
    # Lightning and transformers load torch: importing all three is never faster than one.
    floor = commands["import torch, pytorch_lightning, transformers"]["min_s"]
    assert floor > commands["import torch"]["min_s"]
    assert report["command"].endswith("benchmarks/run.py " + " ".join(argv))


def test_start_up_refuses_no_rounds() -> None:
    with pytest.raises(SystemExit):
        load_run().parse_args(["start-up", "--repeat", "0"])
