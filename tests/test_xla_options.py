"""Which accelerators train on XLA, and the precisions refused there, without torch_xla."""

import pytest
from jsonargparse import Namespace

from seqcls.errors import ConfigurationError
from seqcls.hardware import Hardware
from seqcls.xla_options import check_xla_model, check_xla_precision, runs_on_xla

CPU_ONLY = Hardware(gpus=0, gpu_name=None, gpu_bf16=False, tpu=False, torch_xla=False)
TPU_VM = Hardware(gpus=0, gpu_name=None, gpu_bf16=False, tpu=True, torch_xla=True)
XLA_CLASS = "pytorch_lightning.accelerators.XLAAccelerator"


@pytest.mark.parametrize(
    ("accelerator", "hardware", "expected"),
    [
        ("tpu", CPU_ONLY, True),
        ("auto", TPU_VM, True),
        ("auto", CPU_ONLY, False),
        ("cpu", TPU_VM, False),
        (Namespace(class_path=XLA_CLASS), CPU_ONLY, True),
        (Namespace(class_path="pytorch_lightning.accelerators.CPUAccelerator"), CPU_ONLY, False),
        (Namespace(class_path="no_such_module.Accelerator"), CPU_ONLY, False),
    ],
)
def test_xla_is_named_or_subclassed(
    accelerator: object, hardware: Hardware, expected: bool
) -> None:
    assert runs_on_xla(accelerator, hardware) is expected


@pytest.mark.parametrize("precision", ["bf16-mixed", "16-mixed", "64-true"])
def test_a_precision_xla_does_not_take_is_refused(precision: str) -> None:
    trainer = Namespace(accelerator="tpu", precision=precision)
    with pytest.raises(ConfigurationError, match=f"--trainer.precision {precision}: XLA takes"):
        check_xla_precision(trainer, CPU_ONLY)
    check_xla_precision(Namespace(accelerator="cpu", precision=precision), CPU_ONLY)


@pytest.mark.parametrize("precision", ["32-true", "32", "bf16-true", None])
def test_the_xla_precisions_pass(precision: str | None) -> None:
    check_xla_precision(Namespace(accelerator="tpu", precision=precision), CPU_ONLY)


def test_sixteen_bit_weights_need_a_learning_rate_that_moves_them() -> None:
    with pytest.raises(ConfigurationError, match=r"do not move at a learning rate of 0\.0001"):
        check_xla_model(compile=False, precision="bf16-true", learning_rates=[5e-5 * 2, 1e-3])
    check_xla_model(compile=False, precision="bf16-true", learning_rates=[1e-3])
    check_xla_model(compile=False, precision="32-true", learning_rates=[2e-5])
