"""``LSTM`` and ``GRU``: ``torch.nn.LSTM``/``GRU`` whose forward runs reap's scan backend.

Same parameters, state dict and call signature as torch's (``batch_first=True`` by default, as
TorchRL's), computed by plain torch ops over time instead of torch's fused kernel, so the layer
traces under ``torch.compile`` as one graph. No ``bidirectional``, ``proj_size`` or packed input.

Examples:
    >>> import torch
    >>> from reap_rnn import GRU
    >>> gru = GRU(3, 5, num_layers=2)
    >>> y, h = gru(torch.randn(4, 7, 3))
    >>> tuple(y.shape), tuple(h.shape)
    ((4, 7, 5), (2, 4, 5))
    >>> ref = torch.nn.GRU(3, 5, num_layers=2, batch_first=True)
    >>> ref.load_state_dict(gru.state_dict())
    <All keys matched successfully>
"""

from __future__ import annotations

import torch

from reap_rnn.backends.base import RNNSpec, layer_weights


def _scan():
    from reap.plugins import get_recurrent_backend

    return get_recurrent_backend("scan").impl


class _ScanRNN:
    kind = "?"

    def _check(self):
        if self.bidirectional or getattr(self, "proj_size", 0):
            raise ValueError(f"reap_rnn.{type(self).__name__} does not support bidirectional or proj_size; use torch.nn.{type(self).__name__}")

    def _run(self, x, states):
        if isinstance(x, torch.nn.utils.rnn.PackedSequence):
            raise TypeError(f"reap_rnn.{type(self).__name__} takes padded tensors, not PackedSequence")
        unbatched = x.dim() == 2
        if unbatched:
            x = x.unsqueeze(0 if self.batch_first else 1)
            states = None if states is None else tuple(s.unsqueeze(1) for s in states)
        if not self.batch_first:
            x = x.transpose(0, 1)
        B, T = x.shape[:2]
        if states is None:
            states = tuple(x.new_zeros(self.num_layers, B, self.hidden_size) for _ in range(self._n_states))
        spec = RNNSpec(self.kind, self.num_layers, self.hidden_size, dropout=float(self.dropout))
        is_init = torch.zeros(B, T, dtype=torch.bool, device=x.device)
        y, seq = _scan()(spec, x, states, is_init, layer_weights(self), self.training)
        final = tuple(s[:, -1].transpose(0, 1) for s in seq)
        if not self.batch_first:
            y = y.transpose(0, 1)
        if unbatched:
            y = y.squeeze(0 if self.batch_first else 1)
            final = tuple(s.squeeze(1) for s in final)
        return y, final


class LSTM(_ScanRNN, torch.nn.LSTM):
    """``torch.nn.LSTM`` computed by reap's scan (``batch_first=True`` by default).

    Examples:
        >>> import torch
        >>> from reap_rnn import LSTM
        >>> y, (h, c) = LSTM(3, 5)(torch.randn(2, 4, 3))
        >>> tuple(y.shape), tuple(c.shape)
        ((2, 4, 5), (1, 2, 5))
    """

    kind = "lstm"
    _n_states = 2

    def __init__(self, input_size, hidden_size, num_layers=1, bias=True, batch_first=True,
                 dropout=0.0, bidirectional=False, proj_size=0, device=None, dtype=None):
        super().__init__(input_size, hidden_size, num_layers, bias=bias, batch_first=batch_first,
                         dropout=dropout, bidirectional=bidirectional, proj_size=proj_size,
                         device=device, dtype=dtype)
        self._check()

    def forward(self, input, hx=None):
        return self._run(input, hx)


class GRU(_ScanRNN, torch.nn.GRU):
    """``torch.nn.GRU`` computed by reap's scan (``batch_first=True`` by default).

    Examples:
        >>> import torch
        >>> from reap_rnn import GRU
        >>> y, h = GRU(3, 5)(torch.randn(2, 4, 3))
        >>> tuple(h.shape)
        (1, 2, 5)
    """

    kind = "gru"
    _n_states = 1

    def __init__(self, input_size, hidden_size, num_layers=1, bias=True, batch_first=True,
                 dropout=0.0, bidirectional=False, device=None, dtype=None):
        super().__init__(input_size, hidden_size, num_layers, bias=bias, batch_first=batch_first,
                         dropout=dropout, bidirectional=bidirectional, device=device, dtype=dtype)
        self._check()

    def forward(self, input, hx=None):
        y, (h,) = self._run(input, None if hx is None else (hx,))
        return y, h
