"""The speed-ups: ways to compute the same training step faster on a given device.

Each module is one speed-up behind one switch. Each checks the model it is given (and, for
attention, that the model still gives each row's own logits) and, where it cannot serve it,
falls back to the plain path in one line; none changes what trains.

``device_setup`` is the one place a run switches them on, when it starts; ``allocator`` is
switched on by the command before anything is allocated, ``row_sparse_adamw`` by the
optimiser, and ``matmul_precision``'s setting is a callback that puts torch's back at the end.
The attention speed-ups reach transformers' private names only through
``transformers_hooks``, where each is guarded: a transformers upgrade that renames one turns
off the speed-ups that need it, and says so in one line, rather than breaking
``import seqcls``.

``speedups/`` builds on ``data/`` (how packed batches are laid out) and never imports
``model/`` or ``run/``.
"""
