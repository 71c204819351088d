"""Every private name of transformers that the speed-ups reach, in one place, each guarded.

The attention speed-ups switch a model's attention through transformers' registries of
attention and mask functions, and read which one a model runs and whether it dispatches
through them. None of that is transformers' public API: a release may rename any of it. So
each name is looked up here, when a speed-up asks for it, never at import. Where one is
missing, the speed-ups that need it stay off, one log line says which name and what is off,
and everything else runs as before: ``import seqcls``, training, the other speed-ups.

``switch_attention`` is the one way a speed-up registers an attention function (with the
mask transformers builds for it) and switches a model to it.
"""

import importlib
import inspect
import logging
from collections.abc import Callable
from typing import Any

from torch.nn import Module

log = logging.getLogger(__name__)

# (module, name) of each hook: transformers' registries, its SDPA function and mask builder.
ATTENTION_REGISTRY = ("transformers", "AttentionInterface")
MASK_REGISTRY = ("transformers.masking_utils", "AttentionMaskInterface")
SDPA_MASK = ("transformers.masking_utils", "sdpa_mask")
# Attributes read off a model or its config (transformers 5.x names).
IMPLEMENTATION = "_attn_implementation"  # on the config: the attention function's name
DISPATCHES = "_supports_attention_backend"  # on the model: it calls the registry's functions
FUNCTIONS = "_global_mapping"  # on the attention registry: name to function
# The mask builder's switch that skips building a mask for unpadded rows, found out by a
# read back to the host (``device_mask.py`` turns it off).
BIDIRECTIONAL_SKIP = "allow_is_bidirectional_skip"

_said: set[str] = set()


def _missing(name: str, what: str) -> None:
    """Say once a process that transformers lacks ``name``, so ``what`` is off."""
    if name not in _said:
        _said.add(name)
        log.warning("this transformers has no %s: %s is off", name, what)


def _lookup(where: tuple[str, str], what: str) -> Any:
    module, name = where
    try:
        return getattr(importlib.import_module(module), name)
    except (ImportError, AttributeError):
        _missing(f"{module}.{name}", what)
        return None


def attention_function(name: str, what: str) -> Callable[..., Any] | None:
    """The attention function registered under ``name`` (``sdpa``: transformers' own SDPA),
    or None, said once, where the registry cannot be read or lacks it."""
    registry = _lookup(ATTENTION_REGISTRY, what)
    if registry is None:
        return None
    functions = getattr(registry, FUNCTIONS, None)
    if not isinstance(functions, dict):
        _missing(f"AttentionInterface.{FUNCTIONS}", what)
        return None
    return functions.get(name)


def sdpa_mask(what: str) -> Callable[..., Any] | None:
    """transformers' mask builder for SDPA, or None, said once."""
    mask: Callable[..., Any] | None = _lookup(SDPA_MASK, what)
    return mask


def sdpa_mask_without_host_sync(what: str) -> Callable[..., Any] | None:
    """transformers' SDPA mask builder, always building the mask, or None (said once) where
    it has no switch for that."""
    mask = sdpa_mask(what)
    if mask is None:
        return None
    if BIDIRECTIONAL_SKIP not in inspect.signature(mask).parameters:
        _missing(f"sdpa_mask({BIDIRECTIONAL_SKIP}=...)", what)
        return None

    def built_always(*args: Any, **kwargs: Any) -> Any:
        kwargs[BIDIRECTIONAL_SKIP] = False
        return mask(*args, **kwargs)

    return built_always


def attention_implementation(model: Module, what: str) -> str | None:
    """The name of the attention function ``model`` runs, or None, said once."""
    config = getattr(model, "config", None)
    if config is None:
        return None
    if not hasattr(config, IMPLEMENTATION):
        _missing(f"config.{IMPLEMENTATION}", what)
        return None
    name = getattr(config, IMPLEMENTATION)
    return name if isinstance(name, str) else None


def dispatches_attention(model: Module, what: str) -> bool:
    """Whether ``model`` calls its attention through transformers' registry (where a function
    registered there can replace it); False, said once, where transformers no longer says."""
    if not hasattr(type(model), DISPATCHES):
        _missing(f"PreTrainedModel.{DISPATCHES}", what)
        return False
    return bool(getattr(model, DISPATCHES))


def switch_attention(
    model: Module,
    name: str,
    function: Callable[..., Any],
    mask: Callable[..., Any] | None = None,
    *,
    what: str,
) -> bool:
    """Register ``function`` under ``name`` with ``mask`` (unset: transformers' SDPA mask) as
    its mask builder, and switch ``model`` to it (in place); whether ``model`` now runs it.
    ``what``: the speed-up, named in the one line said where a hook is missing."""
    functions = _lookup(ATTENTION_REGISTRY, what)
    masks = _lookup(MASK_REGISTRY, what)
    mask = mask or sdpa_mask(what)
    if functions is None or masks is None or mask is None:
        return False
    functions.register(name, function)
    masks.register(name, mask)
    return set_attention(model, name, what)


def set_attention(model: Module, name: str, what: str) -> bool:
    """Switch ``model`` to the registered attention function ``name``; whether it runs it."""
    switch = getattr(model, "set_attn_implementation", None)
    if switch is None:
        _missing("PreTrainedModel.set_attn_implementation", what)
        return False
    if attention_implementation(model, what) is None:
        return False
    switch(name)
    return attention_implementation(model, what) == name
