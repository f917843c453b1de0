"""``LSTM`` and ``GRU``: ``torch.nn.LSTM``/``GRU`` whose forward runs reap's scan backend, and the
``LSTMCell``/``GRUCell`` of TorchRL's names.

Same parameters, state dict and call signature as torch's (``batch_first=True`` by default, and
the positional order of TorchRL's python-based layers), computed by plain torch ops over time
instead of torch's fused kernel. Like TorchRL's they subclass ``torch.nn.RNNBase``, not
``torch.nn.LSTM``/``GRU``, whose instances Dynamo refuses: ``torch.compile`` traces them. As in
TorchRL, ``forward`` takes a ``mask`` (``[B, T]``, time-major without ``batch_first``): where it
is False the state is carried over unchanged (padding at the end of shorter sequences). No
``bidirectional`` (``NotImplementedError``, as TorchRL's), ``proj_size`` or packed input.

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
import torch.nn.functional as F

from reap_rnn.backends.base import RNNSpec, layer_weights


def _scan():
    from reap.plugins import get_recurrent_backend

    return get_recurrent_backend("scan").impl


class _ScanRNN:
    kind = "?"

    def _check(self, bidirectional, proj_size=0):
        name = type(self).__name__
        if bidirectional:
            raise NotImplementedError(
                f"Bidirectional {name}s are not supported by reap_rnn.{name}; use torch.nn.{name}"
            )
        if proj_size:
            raise ValueError(f"reap_rnn.{name} does not support proj_size; use torch.nn.{name}")

    def _run(self, x, states, mask):
        if isinstance(x, torch.nn.utils.rnn.PackedSequence):
            raise TypeError(f"reap_rnn.{type(self).__name__} takes padded tensors, not PackedSequence")
        unbatched = x.dim() == 2
        if unbatched:
            x = x.unsqueeze(0 if self.batch_first else 1)
            states = None if states is None else tuple(s.unsqueeze(1) for s in states)
            mask = None if mask is None else mask.unsqueeze(0 if self.batch_first else 1)
        if not self.batch_first:
            x = x.transpose(0, 1)
            mask = None if mask is None else mask.transpose(0, 1)
        B, T = x.shape[:2]
        if states is None:
            states = tuple(x.new_zeros(self.num_layers, B, self.hidden_size) for _ in range(self._n_states))
        if mask is not None:
            y, final = self._run_masked(x, states, mask.bool())
        else:
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

    def _run_masked(self, x, states, mask):
        """Step by step: where ``mask`` is False a layer's state stays what it was."""
        states = [list(s.unbind(0)) for s in states]
        ys = []
        for t in range(x.shape[1]):
            inp, keep = x[:, t], mask[:, t].unsqueeze(-1)
            for k, w in enumerate(layer_weights(self)):
                if k and self.dropout and self.training:
                    inp = F.dropout(inp, self.dropout, training=True)
                new = self._cell(inp, [s[k] for s in states], w)
                for s, value in zip(states, new):
                    s[k] = torch.where(keep, value, s[k])
                inp = states[0][k]
            ys.append(inp)
        return torch.stack(ys, 1), tuple(torch.stack(s, 0) for s in states)


class LSTM(_ScanRNN, torch.nn.RNNBase):
    """``torch.nn.LSTM``'s parameters computed by reap's scan; TorchRL's python-based ``LSTM``
    arguments. Like TorchRL's, an ``nn.RNNBase`` but not an ``nn.LSTM`` (Dynamo traces it).

    Examples:
        >>> import torch
        >>> from reap_rnn import LSTM
        >>> y, (h, c) = LSTM(3, 5)(torch.randn(2, 4, 3))
        >>> tuple(y.shape), tuple(c.shape)
        ((2, 4, 5), (1, 2, 5))
    """

    kind = "lstm"
    _n_states = 2

    def __init__(self, input_size, hidden_size, num_layers=1, batch_first=True, bias=True,
                 dropout=0.0, bidirectional=False, proj_size=0, device=None, dtype=None, use_scan=False):
        self._check(bidirectional, proj_size)
        super().__init__("LSTM", input_size, hidden_size, num_layers, bias=bias, batch_first=batch_first,
                         dropout=dropout, device=device, dtype=dtype)
        self.use_scan = use_scan  # TorchRL's opt-in scan: reap's layer always scans

    @staticmethod
    def _cell(inp, states, w):
        return torch.lstm_cell(inp, tuple(states), w.w_ih, w.w_hh, w.b_ih, w.b_hh)

    def forward(self, input, hx=None, mask=None):
        return self._run(input, hx, mask)


class GRU(_ScanRNN, torch.nn.RNNBase):
    """``torch.nn.GRU``'s parameters computed by reap's scan; TorchRL's python-based ``GRU``
    arguments. Like TorchRL's, an ``nn.RNNBase`` but not an ``nn.GRU`` (Dynamo traces it).

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
                 dropout=0.0, bidirectional=False, device=None, dtype=None, use_scan=False):
        self._check(bidirectional)
        super().__init__("GRU", input_size, hidden_size, num_layers, bias=bias, batch_first=batch_first,
                         dropout=dropout, device=device, dtype=dtype)
        self.use_scan = use_scan  # TorchRL's opt-in scan: reap's layer always scans

    @staticmethod
    def _cell(inp, states, w):
        return (torch.gru_cell(inp, states[0], w.w_ih, w.w_hh, w.b_ih, w.b_hh),)

    def forward(self, input, hx=None, mask=None):
        y, (h,) = self._run(input, None if hx is None else (hx,), mask)
        return y, h


class LSTMCell(torch.nn.LSTMCell):
    """``torch.nn.LSTMCell`` under TorchRL's name (its python cell: same parameters, same results).

    Examples:
        >>> import torch
        >>> from reap_rnn import LSTMCell
        >>> h, c = LSTMCell(3, 5)(torch.randn(2, 3))
        >>> tuple(h.shape)
        (2, 5)
    """


class GRUCell(torch.nn.GRUCell):
    """``torch.nn.GRUCell`` under TorchRL's name (its python cell: same parameters, same results).

    Examples:
        >>> import torch
        >>> from reap_rnn import GRUCell
        >>> tuple(GRUCell(3, 5)(torch.randn(2, 3)).shape)
        (2, 5)
    """
