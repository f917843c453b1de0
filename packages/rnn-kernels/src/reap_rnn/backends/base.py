"""What a recurrent backend is given, and the layer-by-layer driver the scan/Triton backends share.

A backend runs a stack of LSTM or GRU layers over ``[B, T]`` sequences in which ``is_init``
marks the steps where a new trajectory starts: there the incoming state is zero instead of
the previous step's. Backends are registered as :class:`reap.registry.RecurrentBackend`
entries whose ``impl`` is a :class:`RecurrentKernel`; a third party adds one the same way.

Examples:
    >>> import torch
    >>> from reap.plugins import get_recurrent_backend
    >>> from reap_rnn.backends.base import RNNSpec
    >>> spec = RNNSpec(kind="gru", num_layers=1, hidden_size=4)
    >>> kernel = get_recurrent_backend("scan").impl
    >>> kernel.check(spec)
    >>> gru = torch.nn.GRU(3, 4, batch_first=True)
    >>> x, is_init = torch.randn(2, 5, 3), torch.zeros(2, 5, dtype=torch.bool)
    >>> y, (h,) = kernel(spec, x, (torch.zeros(1, 2, 4),), is_init, layer_weights(gru), training=False)
    >>> torch.allclose(y, gru(x)[0], atol=1e-6), tuple(h.shape)
    (True, (2, 5, 1, 4))
"""

from __future__ import annotations

from dataclasses import dataclass

import torch
import torch.nn.functional as F


@dataclass(frozen=True)
class RNNSpec:
    """The recurrent network a backend runs and the options it must honour (or refuse)."""

    kind: str  # "lstm" or "gru"
    num_layers: int
    hidden_size: int
    proj_size: int = 0
    dropout: float = 0.0
    recompute: str = "none"  # "none" or "full"
    compute_dtype: torch.dtype | None = None  # None: the input's dtype
    precision: str = "auto"


@dataclass(frozen=True)
class LayerWeights:
    """One layer's parameters, named as in ``torch.nn.LSTM``/``GRU`` (biases may be None)."""

    w_ih: torch.Tensor
    w_hh: torch.Tensor
    b_ih: torch.Tensor | None
    b_hh: torch.Tensor | None
    w_hr: torch.Tensor | None = None


def layer_weights(rnn: torch.nn.RNNBase) -> list[LayerWeights]:
    """The per-layer parameters of a ``torch.nn.LSTM``/``GRU`` (forward direction)."""
    out = []
    for k in range(rnn.num_layers):
        get = lambda name, k=k: getattr(rnn, f"{name}_l{k}", None)  # noqa: E731
        out.append(LayerWeights(get("weight_ih"), get("weight_hh"), get("bias_ih"), get("bias_hh"),
                                get("weight_hr")))
    return out


class RecurrentKernel:
    """A recurrent backend: ``check(spec)`` refuses what it cannot run, ``__call__`` runs it.

    ``__call__(spec, x, state0, is_init, layers, training)`` takes ``x`` ``[B, T, F]``, the
    states entering step 0 (a tuple of ``[num_layers, B, size]`` tensors: ``(h, c)`` for an
    LSTM, ``(h,)`` for a GRU), ``is_init`` ``[B, T]`` (bool) and the layers' weights, and
    returns ``y`` ``[B, T, size]`` and the states after every step, each ``[B, T, num_layers,
    size]``. Every output is differentiable with respect to ``x``, ``state0`` and the weights.
    """

    name = "?"

    def check(self, spec: RNNSpec) -> None:
        """Raise ``ValueError`` naming the option and the fix if this backend cannot run ``spec``."""

    def check_input(self, x: torch.Tensor) -> None:
        """Raise if this backend cannot run on ``x``'s device or dtype (called on every run)."""

    def __call__(self, spec, x, state0, is_init, layers, training):
        raise NotImplementedError


def refuse(backend: str, option: str, fix: str) -> ValueError:
    return ValueError(f"recurrent_backend={backend!r} does not support {option}; {fix}")


class LayeredKernel(RecurrentKernel):
    """Runs the stack one layer at a time: the input projection of a whole layer is one GEMM,
    then ``layer()`` runs the recurrence over time (time-major ``[T, B, ...]`` tensors)."""

    def check(self, spec):
        if spec.proj_size:
            raise refuse(self.name, "proj_size", "use recurrent_backend='pad'")

    def run_layer(self, spec, inp, w, h0, c0, keep):
        """One layer from its input ``[T, B, F]``: the input projection, then ``layer()``."""
        if spec.kind == "lstm":
            bias = None if w.b_ih is None else w.b_ih + w.b_hh
            return self.layer(spec, F.linear(inp, w.w_ih, bias), h0, c0, keep, w.w_hh, None)
        return self.layer(spec, F.linear(inp, w.w_ih, w.b_ih), h0, None, keep, w.w_hh, w.b_hh)

    def layer(self, spec, xw, h0, c0, keep, w_hh, b_hh):
        """One layer: ``xw`` ``[T, B, G*H]`` (input projection plus biases), ``keep`` ``[T, B]``
        (0 where a trajectory starts); returns the states after every step ``(h_seq[, c_seq])``."""
        raise NotImplementedError

    def __call__(self, spec, x, state0, is_init, layers, training):
        self.check_input(x)
        keep = (~is_init).to(x.dtype).t().contiguous()
        inp = x.transpose(0, 1)
        per_layer = []
        for k, w in enumerate(layers):
            if k and spec.dropout and training:
                inp = F.dropout(inp, spec.dropout, training=True)
            c0 = state0[1][k] if spec.kind == "lstm" else None
            out = self.run_layer(spec, inp, w, state0[0][k], c0, keep)
            per_layer.append(out)
            inp = out[0]
        y = inp.transpose(0, 1)
        states = tuple(  # one layer: a view, not a copy of every step's state
            (per_layer[0][i].unsqueeze(2) if len(per_layer) == 1 else torch.stack([out[i] for out in per_layer], dim=2))
            .transpose(0, 1)
            for i in range(len(per_layer[0]))
        )
        return y, states
