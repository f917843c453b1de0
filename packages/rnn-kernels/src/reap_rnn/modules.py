"""``LSTMModule`` and ``GRUModule``: recurrent TensorDict modules for collection and training.

In single-step mode (collection) the module reads the hidden state from the root, zeroes it
where ``is_init`` is set and writes the next state to ``("next", ...)``. In recurrent mode
(``set_recurrent_mode(True)``, training) it reads ``[B, T]`` batches whose rows may hold several
trajectories (``is_init`` marks where each starts), starts every row from its stored state at
step 0, and writes the output and the state after *every* step, computed by the chosen
backend (``"pad"``, ``"scan"``, ``"triton"`` or ``"auto"``: scan under ``torch.compile``, else
triton on CUDA up to hidden 512 and pad otherwise; ``repr`` says which). Unsupported combinations are errors,
never silent fallbacks.
"""

from __future__ import annotations

import torch
from tensordict import TensorDictBase
from tensordict.nn import TensorDictModuleBase, dispatch
from tensordict.utils import unravel_key_list

from reap.plugins import PluginNotInstalledError, get_recurrent_backend
from reap_rnn import layers
from reap_rnn.backends.base import RNNSpec, layer_weights
from reap_rnn.backends.loop import LoopKernel
from reap_rnn.layers import _ScanRNN
from reap_rnn.mode import recurrent_mode
from reap_rnn.precision import check_precision

BACKENDS = ("auto", "pad", "scan", "triton")
#: The largest hidden size "auto" runs on "triton" (CUDA). Measured on an H200: triton 2-3x
#: faster than pad at 256, pad 1.0-1.2x faster at 1024; 512 is between, unmeasured.
AUTO_TRITON_MAX_HIDDEN = 512
_LOOP = LoopKernel()
RECOMPUTE = ("none", "full")


def _is_compiling() -> bool:
    return torch.compiler.is_compiling()


class _RecurrentModule(TensorDictModuleBase):
    kind = "?"
    rnn_cls: type = torch.nn.Module
    DEFAULT_IN_KEYS: list = []
    DEFAULT_OUT_KEYS: list = []

    def _setup(self, name, *, input_size, hidden_size, num_layers, bias, batch_first, dropout,
               bidirectional, python_based, extra, in_key, in_keys, out_key, out_keys, device, rnn,
               default_recurrent_mode, recurrent_backend, recurrent_recompute, recurrent_compute_dtype,
               recurrent_matmul_precision):
        cls = type(self).__name__
        if recurrent_backend not in BACKENDS:
            raise ValueError(f"{cls}: recurrent_backend must be one of {list(BACKENDS)}, got {recurrent_backend!r}")
        if recurrent_recompute not in RECOMPUTE:
            raise ValueError(f"{cls}: recurrent_recompute must be one of {list(RECOMPUTE)}, got {recurrent_recompute!r}")
        check_precision(recurrent_matmul_precision)
        if recurrent_compute_dtype is not None and not isinstance(recurrent_compute_dtype, torch.dtype):
            raise TypeError(f"{cls}: recurrent_compute_dtype must be a torch.dtype or None, got {recurrent_compute_dtype!r}")
        if rnn is not None:
            if input_size is not None or hidden_size is not None:
                raise ValueError(f"{cls}: pass either {name}= or input_size/hidden_size, not both")
            python_layer = getattr(layers, self.rnn_cls.__name__)
            if not isinstance(rnn, (self.rnn_cls, python_layer)):
                raise TypeError(f"{cls}: {name}= must be a torch.nn.{self.rnn_cls.__name__} (or reap's python-based "
                                f"{self.rnn_cls.__name__}), got {type(rnn).__name__}")
            if not rnn.batch_first:
                raise ValueError(f"{cls}: {name}= must be built with batch_first=True")
        else:
            if input_size is None or hidden_size is None:
                raise ValueError(f"{cls}: input_size and hidden_size are required (or pass {name}=)")
            if not batch_first:
                raise ValueError(
                    f"{cls}: batch_first=False is not supported (nor by TorchRL's {cls}): batches are "
                    "[B, T]; leave batch_first=True"
                )
            if bidirectional:
                rnn = None  # refused below, with the reason
            else:
                rnn = self.rnn_cls(input_size, hidden_size, num_layers, bias=bias, batch_first=True,
                                   dropout=dropout, device=device, **extra)
        if bidirectional or (rnn is not None and rnn.bidirectional):
            raise ValueError(
                f"{cls}: bidirectional=True is not supported: a policy acting step by step cannot read "
                f"future steps; use torch.nn.{self.rnn_cls.__name__} directly for bidirectional encoders"
            )
        if (in_key is None) == (in_keys is None):
            raise ValueError(f"{cls}: pass exactly one of in_key and in_keys")
        if (out_key is None) == (out_keys is None):
            raise ValueError(f"{cls}: pass exactly one of out_key and out_keys")
        in_keys = [in_key, *self.DEFAULT_IN_KEYS] if in_key is not None else in_keys
        out_keys = [out_key, *self.DEFAULT_OUT_KEYS] if out_key is not None else out_keys
        in_keys, out_keys = unravel_key_list(in_keys), unravel_key_list(out_keys)
        n = 1 + len(self.DEFAULT_IN_KEYS)
        if len(in_keys) not in (n, n + 1) or (len(in_keys) == n + 1 and in_keys[-1] != "is_init"):
            raise ValueError(
                f"{cls}: in_keys must be the input and the {len(self.DEFAULT_IN_KEYS)} state key(s) "
                f"(optionally followed by 'is_init'), got {in_keys}"
            )
        if len(out_keys) != n:
            raise ValueError(f"{cls}: out_keys must be the output and the {len(self.DEFAULT_IN_KEYS)} next-state key(s), got {out_keys}")
        if "is_init" not in in_keys:
            in_keys = [*in_keys, "is_init"]
        self.in_keys, self.out_keys = in_keys, out_keys
        self._recurrent_mode = default_recurrent_mode
        self.recurrent_backend = recurrent_backend
        self.recurrent_recompute = recurrent_recompute
        self.recurrent_compute_dtype = recurrent_compute_dtype
        self.recurrent_matmul_precision = recurrent_matmul_precision
        self._spec = RNNSpec(
            kind=self.kind, num_layers=rnn.num_layers, hidden_size=rnn.hidden_size,
            proj_size=getattr(rnn, "proj_size", 0), dropout=float(rnn.dropout),
            recompute=recurrent_recompute, compute_dtype=recurrent_compute_dtype,
            precision=recurrent_matmul_precision,
        )
        if python_based:
            self._set_rnn(self._python_based(rnn))
            rnn = self._rnn
        names = ("pad", "scan") if recurrent_backend == "auto" else (recurrent_backend,)
        self._kernels = {}
        for backend in names:
            kernel = get_recurrent_backend(backend).impl
            try:
                kernel.check(self._spec)
            except ValueError as exc:
                raise ValueError(f"{cls}: {exc}") from None
            self._kernels[backend] = kernel
        self._no_auto_triton = None
        if recurrent_backend == "auto":  # triton on CUDA where it can run this network; repr says why not
            kernel = get_recurrent_backend("triton").impl
            try:
                kernel.check(self._spec)
                self._kernels["triton"] = kernel
            except (ValueError, PluginNotInstalledError) as exc:
                self._no_auto_triton = str(exc)
        return rnn

    # ---- modes ---------------------------------------------------------------------------
    @property
    def recurrent_mode(self) -> bool:
        """True in recurrent (``[B, T]``) mode: ``set_recurrent_mode`` wins over the default."""
        mode = recurrent_mode()
        return bool(self._recurrent_mode) if mode is None else mode

    @recurrent_mode.setter
    def recurrent_mode(self, value):
        raise RuntimeError("recurrent_mode cannot be set in place; use the set_recurrent_mode context manager")

    def set_recurrent_mode(self, mode: bool = True):
        raise RuntimeError(
            "module.set_recurrent_mode() was removed (as in TorchRL): use the reap_rnn.set_recurrent_mode "
            "context manager or default_recurrent_mode= in the constructor"
        )

    @property
    def temporal_mode(self):
        raise RuntimeError("temporal_mode is deprecated, use recurrent_mode instead.")

    # ---- the wrapped layer -----------------------------------------------------------------
    def _python_based(self, rnn):
        """``rnn``'s weights (the same parameters) in reap's ``LSTM``/``GRU`` layer class."""
        cls = getattr(layers, self.rnn_cls.__name__)
        if isinstance(rnn, cls):
            return rnn
        if getattr(rnn, "proj_size", 0):
            raise ValueError(f"{type(self).__name__}: python_based=True does not support proj_size; use the default")
        new = cls(rnn.input_size, rnn.hidden_size, rnn.num_layers, bias=rnn.bias, batch_first=True,
                  dropout=rnn.dropout, device="meta")
        for key, param in rnn.named_parameters():
            setattr(new, key, param)
        return new

    def make_python_based(self):
        """Hold the weights (the same parameters) in reap's ``LSTM``/``GRU`` layer, TorchRL's
        python-based layer; returns ``self``. Where ``"pad"`` would run, the module then runs
        plain torch ops step by step (:mod:`reap_rnn.backends.loop`: ``torch.vmap`` goes
        through); the other backends compute the same either way.

        Examples:
            >>> from reap_rnn import GRU, GRUModule
            >>> module = GRUModule(input_size=3, hidden_size=4, in_key="x", out_key="y")
            >>> isinstance(module.make_python_based().gru, GRU)
            True
        """
        self._set_rnn(self._python_based(self._rnn))
        return self

    def make_cudnn_based(self):
        """Hold the weights (the same parameters) in ``torch.nn.LSTM``/``GRU``; returns ``self``."""
        rnn = self._rnn
        if type(rnn) is self.rnn_cls:
            return self
        new = self.rnn_cls(rnn.input_size, rnn.hidden_size, rnn.num_layers, bias=rnn.bias, batch_first=True,
                           dropout=rnn.dropout, device="meta")
        for key, param in rnn.named_parameters():
            setattr(new, key, param)
        self._set_rnn(new)
        return self

    # ---- layouts ---------------------------------------------------------------------------
    @property
    def canonical_keys(self) -> list:
        """The keys whose memory layout matters to the module: its in_keys and out_keys."""
        return list(self.in_keys) + list(self.out_keys)

    def canonicalize(self, data: TensorDictBase, *, inplace: bool = False) -> TensorDictBase:
        """``data`` with the module's entries (:attr:`canonical_keys`) made contiguous, the
        others left as they are; a shallow copy unless ``inplace``.

        Examples:
            >>> import torch
            >>> from tensordict import TensorDict
            >>> from reap_rnn import LSTMModule
            >>> module = LSTMModule(input_size=3, hidden_size=4, in_key="obs", out_key="out")
            >>> td = TensorDict(obs=torch.zeros(5, 2, 3).transpose(0, 1), batch_size=[2, 5])
            >>> module.canonicalize(td)["obs"].is_contiguous()
            True
        """
        return canonicalize_rnn_subset(data, [self], inplace=inplace)

    # ---- shapes ---------------------------------------------------------------------------
    def _state_sizes(self) -> list[int]:
        raise NotImplementedError

    def make_tensordict_primer(self):
        """A ``TensorDictPrimer`` for the env: zero states at reset, carried between steps.

        Examples:
            >>> from reap_rnn import GRUModule
            >>> primer = GRUModule(input_size=3, hidden_size=8, in_key="x", out_key="y").make_tensordict_primer()
            >>> {k: tuple(v.shape) for k, v in primer.primers.items()}
            {'recurrent_state': (1, 8)}
        """
        from reap.envs.transforms import TensorDictPrimer
        from reap.specs import Unbounded

        cls = type(self).__name__
        primers = {}
        for in_key, out_key, size in zip(self.in_keys[1:], self.out_keys[1:], self._state_sizes()):
            if not isinstance(in_key, str) or out_key != ("next", in_key):
                raise RuntimeError(
                    f"{cls}.make_tensordict_primer: each next-state key must be ('next', <state key>) "
                    f"with a plain string state key; got in_keys={self.in_keys}, out_keys={self.out_keys}"
                )
            primers[in_key] = Unbounded(shape=(self._spec.num_layers, size))
        return TensorDictPrimer(primers, expand_specs=True)

    # ---- forward --------------------------------------------------------------------------
    def forward(self, *args, **kwargs) -> TensorDictBase:
        """``forward(tensordict)``; called with keyword tensors instead (``module(observation=...,
        is_init=...)``) it returns the out_keys' values, as TorchRL's."""
        if len(args) == 1 and not kwargs and isinstance(args[0], TensorDictBase):
            return self._forward(args[0])  # a collector's every step: no dispatch overhead (~5 us)
        return self._dispatched(*args, **kwargs)

    @dispatch
    def _dispatched(self, tensordict: TensorDictBase) -> TensorDictBase:
        return self._forward(tensordict)

    def _forward(self, tensordict: TensorDictBase) -> TensorDictBase:
        if "is_init" not in tensordict.keys():
            raise KeyError(
                f"{type(self).__name__}: the input has no 'is_init' entry; add InitTracker() to the env "
                "(reap.InitTracker) so that the module knows where trajectories start"
            )
        if self.recurrent_mode:
            return self._forward_recurrent(tensordict)
        return self._forward_step(tensordict)

    def _read_states(self, td, lead: tuple[int, ...], like: torch.Tensor) -> list[torch.Tensor]:
        out = []
        for key, size in zip(self.in_keys[1:-1], self._state_sizes()):
            value = td.get(key, None)
            if value is None:
                value = like.new_zeros(*lead, self._spec.num_layers, size)
            out.append(value)
        return out

    def _forward_step(self, tensordict):
        shape = tensordict.batch_size
        x = tensordict.get(self.in_keys[0])
        x = x.reshape(-1, x.shape[-1])
        n = x.shape[0]
        is_init = tensordict.get("is_init").reshape(n, 1, 1)
        states = [
            s.reshape(n, *s.shape[-2:]).masked_fill(is_init, 0.0).transpose(0, 1)
            for s in self._read_states(tensordict, tuple(shape), x)
        ]
        y, new = self._rnn_call(x.unsqueeze(1), states)
        tensordict.set(self.out_keys[0], y.squeeze(1).reshape(*shape, y.shape[-1]))
        for key, s in zip(self.out_keys[1:], new):
            tensordict.set(key, s.transpose(0, 1).reshape(*shape, s.shape[0], s.shape[-1]))
        return tensordict

    def _between_layers(self, k, inp):
        if k and self._spec.dropout and self.training:
            return torch.nn.functional.dropout(inp, self._spec.dropout, training=True)
        return inp

    def auto_backend(self, device: torch.device | str) -> str:
        """The backend ``"auto"`` runs on ``device``: ``"scan"`` under ``torch.compile``, else
        ``"triton"`` on CUDA where it can run this network and the hidden size is at most
        :data:`AUTO_TRITON_MAX_HIDDEN`, and ``"pad"`` otherwise.

        Examples:
            >>> from reap_rnn import GRUModule
            >>> GRUModule(input_size=3, hidden_size=4, in_key="x", out_key="y").auto_backend("cpu")
            'pad'
        """
        if _is_compiling():
            return "scan"
        if (torch.device(device).type == "cuda" and "triton" in self._kernels
                and self._spec.hidden_size <= AUTO_TRITON_MAX_HIDDEN):
            return "triton"
        return "pad"

    def _backend(self, device):
        name = self.auto_backend(device) if self.recurrent_backend == "auto" else self.recurrent_backend
        if name == "pad" and isinstance(self._rnn, _ScanRNN):  # python_based: Python-level steps
            return _LOOP
        return self._kernels[name]

    def __repr__(self) -> str:
        text = super().__repr__()
        backend = repr(self.recurrent_backend)
        if self.recurrent_backend == "auto":
            device = self._rnn.weight_hh_l0.device
            backend += f" ({self.auto_backend(device)} on {device}"
            if self._no_auto_triton and device.type == "cuda":
                backend += f"; not triton: {self._no_auto_triton}"
            backend += ")"
        return f"{text[:-1].rstrip()},\n    recurrent_backend={backend})"

    def _forward_recurrent(self, tensordict):
        shape = tensordict.batch_size
        if len(shape) == 0:
            raise ValueError(f"{type(self).__name__}: recurrent mode needs a TensorDict with a time dimension (its last batch dim)")
        td = tensordict
        if len(shape) == 1:
            td = tensordict.unsqueeze(0)
        elif len(shape) > 2:
            td = tensordict.flatten(0, -2)
        x = td.get(self.in_keys[0])
        is_init = td.get("is_init").reshape(td.shape).bool()
        states = self._read_states(td, tuple(td.shape), x)
        state0 = tuple(s[:, 0].transpose(0, 1) for s in states)
        kernel = self._backend(x.device)
        y, new = kernel(self._spec, x, state0, is_init, layer_weights(self._rnn), self.training)
        outs = [y, *new]
        for key, value in zip(self.out_keys, outs):
            tensordict.set(key, value.reshape(*shape, *value.shape[2:]))
        return tensordict


_COMMON_DOC = """
    Args:
        input_size, hidden_size, num_layers, bias, dropout{extra_args}, bidirectional: as in
            ``torch.nn.{rnn}`` (``bidirectional=True`` is refused: a policy cannot read ahead).

    Keyword Args:
        in_key / in_keys: the input key, or ``[input, {state_names}]`` (``"is_init"`` is appended).
        out_key / out_keys: the output key, or ``[output, {next_names}]``.
        device: where the parameters live.
        {name}: an existing ``torch.nn.{rnn}`` (``batch_first=True``) to wrap instead.
        default_recurrent_mode: the mode outside ``set_recurrent_mode`` (default: single step).
        recurrent_backend: ``"pad"`` (default), ``"scan"``, ``"triton"`` or ``"auto"`` (see
            :meth:`auto_backend`).
        recurrent_recompute: ``"none"`` or ``"full"`` (recompute gate activations in backward;
            ``"scan"`` and ``"triton"`` only).
        recurrent_compute_dtype: dtype of the recurrent matmul in the Triton kernel (None: the
            input's dtype; other backends refuse anything but None).
        recurrent_matmul_precision: ``"auto"``, ``"ieee"``, ``"tf32"`` or ``"tf32x3"`` (Triton).
"""


class LSTMModule(_RecurrentModule):
    __doc__ = """An LSTM reading and writing TensorDicts, with TorchRL's ``LSTMModule`` arguments.
""" + _COMMON_DOC.format(extra_args=", proj_size", rnn="LSTM", name="lstm",
                         state_names="h key, c key", next_names='("next", h key), ("next", c key)') + """
    Examples:
        >>> import torch
        >>> from tensordict import TensorDict
        >>> from reap_rnn import LSTMModule, set_recurrent_mode
        >>> lstm = LSTMModule(input_size=3, hidden_size=8, in_key="obs", out_key="features")
        >>> td = TensorDict(obs=torch.randn(4, 3), is_init=torch.ones(4, 1, dtype=torch.bool),
        ...                 batch_size=[4])
        >>> lstm(td)["next", "recurrent_state_h"].shape
        torch.Size([4, 1, 8])
        >>> seq = TensorDict(obs=torch.randn(4, 10, 3), is_init=torch.zeros(4, 10, 1, dtype=torch.bool),
        ...                  batch_size=[4, 10])
        >>> with set_recurrent_mode(True):
        ...     lstm(seq)["features"].shape
        torch.Size([4, 10, 8])
    """

    kind = "lstm"
    rnn_cls = torch.nn.LSTM
    DEFAULT_IN_KEYS = ["recurrent_state_h", "recurrent_state_c"]
    DEFAULT_OUT_KEYS = [("next", "recurrent_state_h"), ("next", "recurrent_state_c")]

    def __init__(self, input_size: int | None = None, hidden_size: int | None = None,
                 num_layers: int = 1, bias: bool = True, batch_first: bool = True, dropout: float = 0,
                 proj_size: int = 0, bidirectional: bool = False, python_based: bool = False,
                 recurrent_backend: str = "pad", recurrent_compute_dtype: torch.dtype | None = None,
                 recurrent_recompute: str = "none", recurrent_matmul_precision: str = "auto", *,
                 in_key=None, in_keys=None, out_key=None, out_keys=None, device=None,
                 lstm: torch.nn.LSTM | None = None, default_recurrent_mode: bool | None = None):
        super().__init__()
        self.lstm = self._setup(
            "lstm", input_size=input_size, hidden_size=hidden_size, num_layers=num_layers, bias=bias,
            batch_first=batch_first, dropout=dropout, bidirectional=bidirectional,
            python_based=python_based, extra={"proj_size": proj_size},
            in_key=in_key, in_keys=in_keys, out_key=out_key, out_keys=out_keys, device=device,
            rnn=lstm, default_recurrent_mode=default_recurrent_mode,
            recurrent_backend=recurrent_backend, recurrent_recompute=recurrent_recompute,
            recurrent_compute_dtype=recurrent_compute_dtype,
            recurrent_matmul_precision=recurrent_matmul_precision,
        )

    @property
    def _rnn(self):
        return self.lstm

    def _set_rnn(self, rnn):
        self.lstm = rnn

    def _state_sizes(self):
        return [self.lstm.proj_size or self.lstm.hidden_size, self.lstm.hidden_size]

    def _rnn_call(self, x, states):
        inp, hs, cs = x[:, 0], [], []
        for k, w in enumerate(layer_weights(self.lstm)):
            inp = self._between_layers(k, inp)
            h, c = torch.lstm_cell(inp, (states[0][k], states[1][k]), w.w_ih, w.w_hh, w.b_ih, w.b_hh)
            if w.w_hr is not None:
                h = h @ w.w_hr.t()
            hs.append(h)
            cs.append(c)
            inp = h
        return inp.unsqueeze(1), (torch.stack(hs), torch.stack(cs))


class GRUModule(_RecurrentModule):
    __doc__ = """A GRU reading and writing TensorDicts, with TorchRL's ``GRUModule`` arguments.
""" + _COMMON_DOC.format(extra_args="", rnn="GRU", name="gru", state_names="state key",
                         next_names='("next", state key)') + """
    Examples:
        >>> import torch
        >>> from tensordict import TensorDict
        >>> from reap_rnn import GRUModule
        >>> gru = GRUModule(input_size=3, hidden_size=8, num_layers=2, in_key="obs", out_key="features")
        >>> td = TensorDict(obs=torch.randn(4, 3), is_init=torch.ones(4, 1, dtype=torch.bool),
        ...                 batch_size=[4])
        >>> gru(td)["next", "recurrent_state"].shape
        torch.Size([4, 2, 8])
    """

    kind = "gru"
    rnn_cls = torch.nn.GRU
    DEFAULT_IN_KEYS = ["recurrent_state"]
    DEFAULT_OUT_KEYS = [("next", "recurrent_state")]

    def __init__(self, input_size: int | None = None, hidden_size: int | None = None,
                 num_layers: int = 1, bias: bool = True, batch_first: bool = True, dropout: float = 0,
                 bidirectional: bool = False, python_based: bool = False, recurrent_backend: str = "pad",
                 recurrent_compute_dtype: torch.dtype | None = None, recurrent_recompute: str = "none",
                 recurrent_matmul_precision: str = "auto", *, in_key=None, in_keys=None, out_key=None,
                 out_keys=None, device=None, gru: torch.nn.GRU | None = None,
                 default_recurrent_mode: bool | None = None):
        super().__init__()
        self.gru = self._setup(
            "gru", input_size=input_size, hidden_size=hidden_size, num_layers=num_layers, bias=bias,
            batch_first=batch_first, dropout=dropout, bidirectional=bidirectional,
            python_based=python_based, extra={},
            in_key=in_key, in_keys=in_keys, out_key=out_key, out_keys=out_keys, device=device,
            rnn=gru, default_recurrent_mode=default_recurrent_mode,
            recurrent_backend=recurrent_backend, recurrent_recompute=recurrent_recompute,
            recurrent_compute_dtype=recurrent_compute_dtype,
            recurrent_matmul_precision=recurrent_matmul_precision,
        )

    @property
    def _rnn(self):
        return self.gru

    def _set_rnn(self, rnn):
        self.gru = rnn

    def _state_sizes(self):
        return [self.gru.hidden_size]

    def _rnn_call(self, x, states):
        inp, hs = x[:, 0], []
        for k, w in enumerate(layer_weights(self.gru)):
            inp = self._between_layers(k, inp)
            inp = torch.gru_cell(inp, states[0][k], w.w_ih, w.w_hh, w.b_ih, w.b_hh)
            hs.append(inp)
        return inp.unsqueeze(1), (torch.stack(hs),)


def canonicalize_rnn_subset(data: TensorDictBase, modules, *, inplace: bool = False) -> TensorDictBase:
    """``data`` with the entries of ``modules``' :attr:`canonical_keys` made contiguous (those it
    holds), the others untouched; a shallow copy unless ``inplace``, as TorchRL's.

    Examples:
        >>> import torch
        >>> from tensordict import TensorDict
        >>> from reap_rnn import GRUModule, LSTMModule, canonicalize_rnn_subset
        >>> actor = LSTMModule(input_size=3, hidden_size=4, in_key="obs", out_key="a")
        >>> critic = GRUModule(input_size=3, hidden_size=4, in_key="obs", out_key="c")
        >>> td = TensorDict(obs=torch.zeros(5, 2, 3).transpose(0, 1), batch_size=[2, 5])
        >>> canonicalize_rnn_subset(td, [actor, critic])["obs"].is_contiguous()
        True
    """
    present = set(data.keys(True))
    keys = list(dict.fromkeys(k for module in modules for k in module.canonical_keys if k in present))
    if not keys:
        return data
    out = data if inplace else data.copy()
    out.update(data.select(*keys).apply(_canonical))
    return out


def _canonical(t: torch.Tensor) -> torch.Tensor:
    """``t`` if its strides are the row-major ones, else a row-major copy (``is_contiguous()``
    accepts any stride on a dim of size 1; kernels that read raw strides do not)."""
    strides, step = [], 1
    for size in reversed(t.shape):
        strides.insert(0, step)
        step *= size
    return t if t.stride() == tuple(strides) else t.clone(memory_format=torch.contiguous_format)
