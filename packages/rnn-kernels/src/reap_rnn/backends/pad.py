"""``"pad"``: split each row at its resets, pad the pieces, run torch's RNN on them packed.

Every trajectory piece becomes its own sequence (starting from the stored state when it opens
its row without a reset, from zeros otherwise); the pieces are packed so no padding is
computed, each layer runs as one call of torch's fused RNN, and the outputs are scattered
back to ``[B, T]``. An LSTM's cell states at every step, which the fused call does not
return, are rebuilt from its gates in one extra pass. Supports ``proj_size``.

Examples:
    >>> import torch
    >>> from reap_rnn.backends.base import RNNSpec, layer_weights
    >>> from reap_rnn.backends.pad import PadKernel
    >>> gru = torch.nn.GRU(3, 4, batch_first=True)
    >>> x = torch.randn(1, 6, 3)
    >>> is_init = torch.tensor([[True, False, False, True, False, False]])
    >>> y, _ = PadKernel()(RNNSpec("gru", 1, 4), x, (torch.zeros(1, 1, 4),), is_init,
    ...                    layer_weights(gru), training=False)
    >>> torch.allclose(y[:, 3:], gru(x[:, 3:])[0], atol=1e-6)
    True
"""

from __future__ import annotations

import torch
import torch.nn.functional as F
from torch.nn.utils.rnn import pack_padded_sequence, pad_packed_sequence

from reap_rnn.backends.base import RecurrentKernel, refuse


class _Pieces:
    """Where each step of a ``[B, T]`` batch lands in the padded ``[N, T_max]`` layout."""

    def __init__(self, is_init: torch.Tensor):
        B, T = is_init.shape
        starts = is_init.clone()
        starts[:, 0] = True
        flat = starts.reshape(-1)
        self.piece = flat.cumsum(0) - 1  # piece index of every step
        first = flat.nonzero().squeeze(1)  # flat position of every piece's first step
        self.pos = torch.arange(B * T, device=is_init.device) - first[self.piece]
        self.lengths = torch.bincount(self.piece, minlength=first.numel())
        self.n, self.t_max = first.numel(), int(self.lengths.max())
        self.row = first // T
        # a piece that opens its row without a reset continues the stored state
        self.stored = ((first % T) == 0) & ~is_init.reshape(-1)[first]

    def pad(self, x: torch.Tensor) -> torch.Tensor:
        flat = x.reshape(-1, x.shape[-1])
        out = flat.new_zeros(self.n, self.t_max, flat.shape[-1])
        return out.index_put((self.piece, self.pos), flat)

    def unpad(self, padded: torch.Tensor, B: int, T: int) -> torch.Tensor:
        return padded[self.piece, self.pos].reshape(B, T, -1)

    def initial(self, state: torch.Tensor) -> torch.Tensor:
        """``state`` ``[L, B, H]`` per piece: ``[L, N, H]``, zero where the piece starts fresh."""
        mask = self.stored.to(state.dtype)[None, :, None]
        return state[:, self.row] * mask


class PadKernel(RecurrentKernel):
    """The ``"pad"`` backend (see the module docstring)."""

    name = "pad"

    def check(self, spec):
        if spec.recompute != "none":
            raise refuse("pad", "recurrent_recompute='full'", "use recurrent_backend='scan' or 'triton'")
        if spec.compute_dtype is not None:
            raise refuse("pad", "recurrent_compute_dtype", "use recurrent_backend='triton' or leave it None")

    def __call__(self, spec, x, state0, is_init, layers, training):
        B, T = is_init.shape
        pieces = _Pieces(is_init)
        lengths = pieces.lengths.cpu()
        inp = pieces.pad(x)
        keep = (~is_init).to(x.dtype)
        outputs = []
        for k, w in enumerate(layers):
            if k and spec.dropout and training:
                inp = F.dropout(inp, spec.dropout, training=True)
            layer_in_padded = inp
            packed = pack_padded_sequence(inp, lengths, batch_first=True, enforce_sorted=False)
            order = packed.sorted_indices
            h0 = pieces.initial(state0[0][k : k + 1]).index_select(1, order)
            params = [w.w_ih, w.w_hh] + ([w.b_ih, w.b_hh] if w.b_ih is not None else [])
            if spec.kind == "lstm":
                c0 = pieces.initial(state0[1][k : k + 1]).index_select(1, order)
                if w.w_hr is not None:
                    params.append(w.w_hr)
                out, *_ = torch.lstm(packed.data, packed.batch_sizes, (h0, c0), params,
                                     w.b_ih is not None, 1, 0.0, training, False)
            else:
                out, _ = torch.gru(packed.data, packed.batch_sizes, h0, params,
                                   w.b_ih is not None, 1, 0.0, training, False)
            padded, _ = pad_packed_sequence(
                packed._replace(data=out), batch_first=True, total_length=pieces.t_max
            )
            inp = padded
            h_seq = pieces.unpad(padded, B, T)
            if spec.kind == "lstm":
                layer_in = x if k == 0 else pieces.unpad(layer_in_padded, B, T)
                outputs.append((h_seq, _cell_states(layer_in, h_seq, state0[0][k], state0[1][k],
                                                    keep, w)))
            else:
                outputs.append((h_seq,))
        y = outputs[-1][0]
        states = tuple(torch.stack([o[i] for o in outputs], dim=2) for i in range(len(outputs[0])))
        return y, states


def _cell_states(x, h_seq, h0, c0, keep, w) -> torch.Tensor:
    """The LSTM cell state after every step, rebuilt from the hidden states: ``[B, T, H]``."""
    h_in = torch.cat([h0.unsqueeze(1), h_seq[:, :-1]], 1) * keep.unsqueeze(-1)
    bias = None if w.b_ih is None else w.b_ih + w.b_hh
    gates = F.linear(x, w.w_ih, bias) + F.linear(h_in, w.w_hh)
    i, f, g, _ = gates.chunk(4, -1)
    forget = torch.sigmoid(f) * keep.unsqueeze(-1)
    write = torch.sigmoid(i) * torch.tanh(g)
    c, out = c0, []
    for t in range(x.shape[1]):
        c = torch.addcmul(write[:, t], forget[:, t], c)
        out.append(c)
    return torch.stack(out, 1)
