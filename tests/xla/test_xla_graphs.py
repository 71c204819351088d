"""What keeps a TPU run's graphs the same from one validation to the next
(seqcls.run.fit.xla_graphs).

The rehearsal (test_rehearsal.py) shows the whole effect; these pin each piece on one XLA:CPU
device.
"""

import os
import subprocess
import sys
from types import SimpleNamespace

import pytest
import torch
from xla_cpu import CPUXLAAccelerator

from seqcls.run.checkpoints.saving import BestCheckpoint
from seqcls.run.fit.xla_graphs import EndEvaluationGraphs, log_host_value

pytestmark = pytest.mark.xla


@pytest.fixture
def torch_xla():
    return pytest.importorskip(
        "torch_xla", reason="torch_xla is not installed: bash scripts/test.sh --xla runs this lane"
    )


def pending_graph(torch_xla, tensor: torch.Tensor) -> str:
    return torch_xla._XLAC._get_xla_tensors_text([tensor])


def test_an_evaluation_batch_ends_its_graph_on_xla(torch_xla) -> None:
    trainer = SimpleNamespace(accelerator=CPUXLAAccelerator())
    running_sum = torch.zeros(4, device="xla") + torch.ones(4, device="xla") * 3
    assert "aten::add" in pending_graph(torch_xla, running_sum)
    EndEvaluationGraphs().on_validation_batch_end(trainer, None, None, None, 0)
    assert "aten::add" not in pending_graph(torch_xla, running_sum)
    assert "device_data" in pending_graph(torch_xla, running_sum)


def test_the_best_checkpoint_judges_scores_on_the_host(torch_xla) -> None:
    score = torch.tensor(0.25, device="xla")
    trainer = SimpleNamespace(callback_metrics={"val/loss": score}, current_epoch=0, global_step=6)
    candidates = BestCheckpoint(monitor="val/loss")._monitor_candidates(trainer)
    assert candidates["val/loss"].device.type == "cpu"
    assert float(candidates["val/loss"]) == 0.25


def test_a_value_computed_on_the_host_is_logged_on_the_host(torch_xla) -> None:
    # On the device, its running state (restored on resume, reset by the next validation)
    # changed its graph: the rehearsal compiled again at the second validation of a resumed
    # process that had trained one step before its first.
    logged: dict[str, tuple[object, dict[str, object]]] = {}
    module = SimpleNamespace(
        trainer=SimpleNamespace(accelerator=CPUXLAAccelerator()),
        log=lambda name, value, **options: logged.update({name: (value, options)}),
    )
    log_host_value(module, "val/ece", 0.125)
    value, options = logged["val/ece"]
    assert isinstance(value, torch.Tensor)
    assert value.device.type == "cpu"
    assert float(value) == 0.125
    assert not options.get("sync_dist")


def test_the_seqcls_command_keeps_zero_and_one_as_data(torch_xla) -> None:
    # A fresh process, as a TPU job starts: the command sets it before torch_xla loads.
    probe = """
import contextlib, torch
from seqcls.cli import main
with contextlib.suppress(SystemExit):
    main(["fit", "--help"])
import torch_xla
print(torch_xla._XLAC._get_xla_tensors_text([torch.tensor(0.0).to("xla")]))
"""
    env = {k: v for k, v in os.environ.items() if k != "XLA_NO_SPECIAL_SCALARS"}
    result = subprocess.run(
        [sys.executable, "-c", probe], env=env, capture_output=True, text=True, timeout=300
    )
    assert result.returncode == 0, result.stderr[-3000:]
    assert "xla::device_data" in result.stdout
    assert "prim::Constant" not in result.stdout
