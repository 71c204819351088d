"""A transformers release that renames one of its private names turns off only the speed-ups
that need it, says so in one line, and breaks neither ``import seqcls`` nor a fit.

A rename is simulated by pointing ``transformers_hooks`` at a name transformers lacks, so
that transformers itself runs as it does; the import check deletes the real names instead.
A whole fit with a renamed hook: ``tests/integration/test_renamed_transformers_hook.py``.
"""

import subprocess
import sys

import pytest
from packed_rows import tiny_model

from seqcls.model.packed_forward import PackedForward
from seqcls.speedups import transformers_hooks
from seqcls.speedups.cpu_dropout import CPUDropout, use_cpu_dropout
from seqcls.speedups.device_mask import DEVICE_MASK_ATTENTION, use_device_side_attention_mask
from seqcls.speedups.matmul_precision import MKL_ATTENTION, keep_attention_in_mkl

RENAMED = "seqcls_test_renamed"


@pytest.fixture(autouse=True)
def nothing_said_yet(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(transformers_hooks, "_said", set())


def said(caplog: pytest.LogCaptureFixture) -> list[str]:
    return [
        record.getMessage()
        for record in caplog.records
        if record.name == transformers_hooks.__name__
    ]


def test_every_hook_is_found_in_this_transformers(caplog: pytest.LogCaptureFixture) -> None:
    model = tiny_model("bert")
    assert transformers_hooks.attention_function("sdpa", "a test") is not None
    assert transformers_hooks.sdpa_mask_without_host_sync("a test") is not None
    assert transformers_hooks.attention_implementation(model, "a test") == "sdpa"
    assert transformers_hooks.dispatches_attention(model, "a test")
    assert said(caplog) == []


def test_without_the_dispatch_flag_only_attention_by_segments_is_off(
    monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    monkeypatch.setattr(transformers_hooks, "DISPATCHES", RENAMED)
    model = tiny_model("bert")
    forward = PackedForward(model)
    assert keep_attention_in_mkl(model)  # needs no dispatch flag: still on
    assert not forward.use_segments()
    assert not forward.use_segments()  # asked again: nothing said again
    assert model.config._attn_implementation == MKL_ATTENTION
    (line,) = said(caplog)
    assert RENAMED in line
    assert "attention by segments" in line


def test_without_the_attention_registry_attention_stays_sdpa_and_dropout_still_switches(
    monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    monkeypatch.setattr(transformers_hooks, "FUNCTIONS", RENAMED)
    model = tiny_model("bert")
    assert not keep_attention_in_mkl(model)
    assert use_cpu_dropout(model) > 0  # the dropout layers need no hook
    assert not PackedForward(model).use_segments()
    assert model.config._attn_implementation == "sdpa"
    assert any(isinstance(module, CPUDropout) for module in model.modules())
    (line,) = said(caplog)
    assert f"AttentionInterface.{RENAMED}" in line


@pytest.mark.parametrize(
    ("hook", "renamed"),
    [
        ("SDPA_MASK", ("transformers.masking_utils", RENAMED)),
        ("MASK_REGISTRY", ("transformers.masking_utils", RENAMED)),
        ("ATTENTION_REGISTRY", ("transformers", RENAMED)),
        ("IMPLEMENTATION", RENAMED),
    ],
)
def test_a_missing_hook_keeps_the_models_own_attention(
    monkeypatch: pytest.MonkeyPatch,
    caplog: pytest.LogCaptureFixture,
    hook: str,
    renamed: object,
) -> None:
    monkeypatch.setattr(transformers_hooks, hook, renamed)
    model = tiny_model("bert")
    assert not keep_attention_in_mkl(model)
    assert not PackedForward(model).use_segments()
    assert model.config._attn_implementation == "sdpa"
    (line,) = said(caplog)
    assert RENAMED in line


def test_without_the_mask_builders_switch_the_device_side_mask_is_off(
    monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    model = tiny_model("bert")
    use_device_side_attention_mask(model)
    assert model.config._attn_implementation == DEVICE_MASK_ATTENTION
    model = tiny_model("bert")
    monkeypatch.setattr(transformers_hooks, "BIDIRECTIONAL_SKIP", RENAMED)
    use_device_side_attention_mask(model)
    assert model.config._attn_implementation == "sdpa"
    (line,) = said(caplog)
    assert RENAMED in line
    assert "built on the device" in line


# What a transformers without them looks like to seqcls: each private name deleted.
WITHOUT_PRIVATE_NAMES = """
import importlib, pkgutil, sys
import transformers, transformers.masking_utils, transformers.integrations.sdpa_attention
from transformers import AttentionInterface, PreTrainedModel
del transformers.masking_utils.sdpa_mask
del transformers.masking_utils.AttentionMaskInterface
del transformers.integrations.sdpa_attention.sdpa_attention_forward
del AttentionInterface._global_mapping
del PreTrainedModel._supports_attention_backend
import seqcls
modules = [seqcls.__name__]
modules += [m.name for m in pkgutil.walk_packages(seqcls.__path__, "seqcls.")]
for name in modules:
    importlib.import_module(name)
print(len(modules))
"""


def test_import_seqcls_needs_none_of_transformers_private_names() -> None:
    done = subprocess.run(
        [sys.executable, "-c", WITHOUT_PRIVATE_NAMES],
        capture_output=True,
        text=True,
        env={"PATH": "/usr/bin:/bin", "PYTHONPATH": ":".join(sys.path), "HF_HUB_OFFLINE": "1"},
    )
    assert done.returncode == 0, done.stderr[-2000:]
    assert int(done.stdout.split()[-1]) > 100  # every module of the package imported
