"""The recurrence as plain torch ops step by step, differentiated by autograd: what a
``python_based=True`` module runs where it would run ``"pad"``, as TorchRL's python-based
layers run Python-level cells there. Slower than pad's fused call, but every op has a batching
rule, so ``torch.vmap`` over the parameters (ensembles) and other ``torch.func`` transforms
go through; pad's fused ``torch.lstm``/``torch.gru`` calls and scan's hand-written backward do
not.

Examples:
    >>> import torch
    >>> from reap_rnn.backends.base import RNNSpec, layer_weights
    >>> gru = torch.nn.GRU(3, 4, batch_first=True)
    >>> x, is_init = torch.randn(2, 5, 3), torch.zeros(2, 5, dtype=torch.bool)
    >>> y, _ = LoopKernel()(RNNSpec("gru", 1, 4), x, (torch.zeros(1, 2, 4),), is_init, layer_weights(gru), False)
    >>> torch.allclose(y, gru(x)[0], atol=1e-6)
    True
"""

from __future__ import annotations

import torch
import torch.nn.functional as F

from reap_rnn.backends.base import LayeredKernel


class LoopKernel(LayeredKernel):
    """See the module docstring."""

    name = "loop"

    def layer(self, spec, xw, h0, c0, keep, w_hh, b_hh):
        h, c, hs, cs = h0, c0, [], []
        for t in range(xw.shape[0]):
            k = keep[t].unsqueeze(-1)
            h = h * k
            if spec.kind == "lstm":
                i, f, g, o = (xw[t] + F.linear(h, w_hh)).chunk(4, -1)
                c = torch.sigmoid(f) * (c * k) + torch.sigmoid(i) * torch.tanh(g)
                h = torch.sigmoid(o) * torch.tanh(c)
                cs.append(c)
            else:
                r, z, n = xw[t].chunk(3, -1)
                hr, hz, hn = F.linear(h, w_hh, b_hh).chunk(3, -1)
                r, z = torch.sigmoid(r + hr), torch.sigmoid(z + hz)
                n = torch.tanh(n + r * hn)
                h = n + z * (h - n)
            hs.append(h)
        if spec.kind == "lstm":
            return torch.stack(hs), torch.stack(cs)
        return (torch.stack(hs),)
