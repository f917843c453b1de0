"""Registers reap-rnn-kernels: the ``"pad"``, ``"scan"`` and ``"triton"`` recurrent backends, and
``LSTMModule``, ``GRUModule``, ... as names importable from ``reap``.

Examples:
    >>> from reap_rnn.plugin import reap_register_recurrent_backends
    >>> entries = []
    >>> reap_register_recurrent_backends(entries.append)
    >>> [entry.name for entry in entries]
    ['pad', 'scan', 'triton']
"""

from __future__ import annotations

from reap.plugins import hookimpl
from reap.registry import RecurrentBackend


@hookimpl
def reap_register_recurrent_backends(register):
    """The three built-in backends (Triton's is imported lazily: triton loads on first use)."""
    from reap_rnn.backends.pad import PadKernel
    from reap_rnn.backends.scan import ScanKernel
    from reap_rnn.backends.triton_backend import TritonKernel

    register(RecurrentBackend("pad", PadKernel(), "split at resets, pad, torch's fused RNN on packed pieces"))
    register(RecurrentBackend("scan", ScanKernel(), "scan over time with resets, hand-written backward"))
    register(RecurrentBackend("triton", TritonKernel(), "fused Triton kernels, resets in-kernel, tiled over hidden"))


@hookimpl
def reap_register_exports(register):
    """Export every public name of :mod:`reap_rnn` from :mod:`reap` and TorchRL's paths
    (``torchrl.modules``, ``torchrl.modules.tensordict_module`` and its ``rnn``)."""
    import reap_rnn

    modules = ("reap.modules", "reap.modules.tensordict_module", "reap.modules.tensordict_module.rnn")
    for name in reap_rnn.__all__:
        register(name, f"reap_rnn:{name}", modules=modules)
