"""Moving trainer weights into a collector's policy.

``as_weights`` turns every form TorchRL's ``update_policy_weights_`` accepts (a module, a
TensorDict, a state dict) into a TensorDict of tensors; ``match_weights`` checks them against
the policy's (same keys, equal shapes, dtypes cast only when exact) and ``copy_weights`` writes
them; ``VanillaWeightUpdater`` copies such weights into an in-process policy. Multi-worker packages build their updaters on
``WeightUpdaterBase`` and their weight-sync schemes on :class:`WeightSyncScheme` (and, for weights
pushed out of band, :class:`WeightReceiver`), found by :func:`resolve_weight_sync_scheme`.

Examples:
    >>> import torch
    >>> from reap.weight_update import VanillaWeightUpdater
    >>> policy, trained = torch.nn.Linear(2, 1), torch.nn.Linear(2, 1)
    >>> updater = VanillaWeightUpdater(policy_weights=policy)
    >>> updater.push_weights(trained)
    >>> torch.equal(policy.weight, trained.weight)
    True
"""

from __future__ import annotations

import warnings
from collections.abc import Callable, Mapping

import torch
from tensordict import TensorDict, TensorDictBase

from reap.mirror import module_getattr


def as_weights(obj) -> TensorDictBase:
    """A TensorDict of tensors from a module, a TensorDict or a (state) dict."""
    if isinstance(obj, torch.nn.Module):
        return TensorDict.from_module(obj).data
    if isinstance(obj, TensorDictBase):
        return obj.data if hasattr(obj, "data") else obj
    if isinstance(obj, Mapping):
        td = TensorDict(dict(obj))
        if any(isinstance(k, str) and "." in k for k in obj):
            td = td.unflatten_keys(".")
        return td
    raise TypeError(
        f"weights must be an nn.Module, a TensorDict or a dict of tensors, got {type(obj).__name__}"
    )


def copy_weights(dest: TensorDictBase, weights) -> None:
    """Copy ``weights`` (any form :func:`as_weights` takes) into ``dest`` in place, after
    :func:`match_weights` checked them."""
    weights = match_weights(dest, weights)
    with torch.no_grad():
        dest.update_(weights)


def match_weights(template: TensorDictBase, weights) -> TensorDictBase:
    """``weights`` (any form :func:`as_weights` takes) laid out exactly as ``template``, or a ValueError.

    Keys must match (weights of a ``TensorDictModule``'s inner module may omit the leading
    ``"module"``), shapes must be equal (no broadcasting), and a leaf whose dtype differs from
    the template's is cast only when the cast is exact: every value comes back unchanged (NaN
    as NaN). The error names the key. Only the template's shapes and dtypes are read, so it
    may live on the ``"meta"`` device. Returns ``weights`` itself when nothing needs a cast.

    Examples:
        >>> import torch
        >>> from tensordict import TensorDict
        >>> policy = TensorDict({"weight": torch.zeros(1, 3)})
        >>> match_weights(policy, TensorDict({"weight": torch.ones(1, 3, dtype=torch.int64)}))["weight"].dtype
        torch.float32
        >>> match_weights(policy, TensorDict({"weight": torch.ones(3)}))
        Traceback (most recent call last):
        ...
        ValueError: the weights' 'weight' has shape (3,) but the policy's has shape (1, 3); pass weights of exactly the policy's shapes
    """
    weights = as_weights(weights)
    dest_keys, src_keys = _leaf_keys(template), _leaf_keys(weights)
    if dest_keys != src_keys and {("module", *k) for k in src_keys} == dest_keys:
        weights = TensorDict({"module": weights})  # the inner module's weights of a TensorDictModule
        src_keys = dest_keys
    if dest_keys != src_keys:
        def names(keys):
            return sorted(".".join(k) for k in keys)[:5]

        raise ValueError(
            "the weights do not match the policy's parameters: missing "
            f"{names(dest_keys - src_keys)}, unexpected {names(src_keys - dest_keys)}"
        )
    casts = {}
    for key, dest in template.items(include_nested=True, leaves_only=True):
        src = weights.get(key)
        name = ".".join(key) if isinstance(key, tuple) else key
        if not isinstance(src, torch.Tensor):
            raise ValueError(f"the weights' {name!r} is a {type(src).__name__}, not a tensor")
        if src.shape != dest.shape:
            raise ValueError(
                f"the weights' {name!r} has shape {tuple(src.shape)} but the policy's has shape "
                f"{tuple(dest.shape)}; pass weights of exactly the policy's shapes"
            )
        if src.dtype != dest.dtype:
            casts[key] = exact_cast(src, dest.dtype, name=name)
    if casts:
        weights = weights.copy()  # shallow: the caller's TensorDict is left as it was
        for key, value in casts.items():
            weights.set(key, value)
    return weights


def exact_cast(tensor: torch.Tensor, dtype: torch.dtype, *, name: str = "tensor") -> torch.Tensor:
    """``tensor`` cast to ``dtype`` if every value survives the cast unchanged, else ValueError.

    A value survives when the cast value equals the original (compared at the promoted dtype)
    and casting it back gives the original again; NaN counts as equal to NaN.

    Examples:
        >>> import torch
        >>> exact_cast(torch.tensor([1, 2]), torch.float32)
        tensor([1., 2.])
        >>> exact_cast(torch.tensor([0.5]), torch.int64, name="bias")
        Traceback (most recent call last):
        ...
        ValueError: the weights' 'bias' are torch.float32 and cannot be cast exactly to the policy's torch.int64 (0.5 would become 0); convert them to torch.int64 yourself if that loss is intended
    """
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # complex -> real warns; a lost imaginary part is refused below
        cast = tensor.detach().to(dtype)
        back = cast.to(tensor.dtype)
        same = _equal_or_nan(back, tensor) & _equal_or_nan(cast, tensor)
    if not bool(same.all()):
        i = int((~same).reshape(-1).nonzero()[0])
        before, after = tensor.reshape(-1)[i].item(), cast.reshape(-1)[i].item()
        raise ValueError(
            f"the weights' {name!r} are {tensor.dtype} and cannot be cast exactly to the policy's "
            f"{dtype} ({before!r} would become {after!r}); convert them to {dtype} yourself if that "
            "loss is intended"
        )
    return cast


def _equal_or_nan(a: torch.Tensor, b: torch.Tensor) -> torch.Tensor:
    same = a == b
    if a.is_floating_point() or a.is_complex() or b.is_floating_point() or b.is_complex():
        same = same | (torch.isnan(a) & torch.isnan(b))
    return same


def _leaf_keys(td: TensorDictBase) -> set[tuple[str, ...]]:
    return {k if isinstance(k, tuple) else (k,) for k in td.keys(include_nested=True, leaves_only=True)}


def weights_from_update_args(policy_or_weights=None, *, model_id=None, weights_dict=None, **kwargs):
    """The weights of an ``update_policy_weights_`` call, from any of TorchRL's spellings.

    ``policy_or_weights`` positionally, or ``policy=`` / ``weights=`` / ``policy_weights=``, or
    ``weights_dict={"policy": ...}``; ``model_id`` may only name ``"policy"``. Returns None when
    no weights were given (the collector then reads its own source policy).

    Examples:
        >>> weights_from_update_args(weights_dict={"policy": {"w": 1}})
        {'w': 1}
        >>> weights_from_update_args(model_id="critic")
        Traceback (most recent call last):
        ...
        ValueError: update_policy_weights_: model_id='critic'; only 'policy' is synchronised
    """
    for name in ("policy", "weights", "policy_weights"):
        if name in kwargs:
            policy_or_weights = kwargs.pop(name)
    if kwargs:
        raise TypeError(f"update_policy_weights_: unexpected arguments {sorted(kwargs)}")
    if model_id not in (None, "policy"):
        raise ValueError(f"update_policy_weights_: model_id={model_id!r}; only 'policy' is synchronised")
    if weights_dict is not None:
        unknown = set(weights_dict) - {"policy"}
        if unknown:
            raise ValueError(f"update_policy_weights_: weights_dict has unknown models {sorted(unknown)}")
        policy_or_weights = weights_dict.get("policy")
    return policy_or_weights


class WeightStrategy:
    """Takes weights out of a model and puts them into another: TorchRL's ``WeightStrategy``.

    ``extract_as="tensordict"`` (the default) gives a module's parameters and buffers as a
    TensorDict sharing their storage, plus what its ``get_extra_state()`` returns under
    ``"__extra_state__"`` (running statistics that are not buffers); ``"state_dict"`` gives
    ``module.state_dict()``. A TensorDict or a (state) dict passes through in the asked form.
    ``apply_weights`` reads either form: in place (the default) it copies into the destination's
    tensors after the checks of ``update_policy_weights_`` (same keys and shapes, exact casts
    only; the error names the key); ``inplace=False`` makes the weights the module's own
    tensors (parameters stay ``nn.Parameter``). ``"__extra_state__"`` goes to the destination
    module's ``set_extra_state``.

    Examples:
        >>> import torch
        >>> strategy = WeightStrategy()
        >>> trained, policy = torch.nn.Linear(2, 1), torch.nn.Linear(2, 1)
        >>> weights = strategy.extract_weights(trained)
        >>> sorted(weights.keys())
        ['bias', 'weight']
        >>> strategy.apply_weights(policy, weights)
        >>> torch.equal(policy.weight, trained.weight)
        True
        >>> sorted(WeightStrategy("state_dict").extract_weights(trained))
        ['bias', 'weight']
    """

    def __init__(self, extract_as: str = "tensordict"):
        if extract_as not in ("tensordict", "state_dict"):
            raise ValueError(f"WeightStrategy: extract_as must be 'tensordict' or 'state_dict', got {extract_as!r}")
        self.extract_as = extract_as

    def extract_weights(self, source):
        """The weights of ``source`` (a module, a TensorDict or a state dict) in ``extract_as`` form."""
        if self.extract_as == "state_dict":
            if isinstance(source, torch.nn.Module):
                return source.state_dict()
            if isinstance(source, TensorDictBase):
                return source.flatten_keys(".").to_dict()
            if isinstance(source, Mapping):
                return source
            raise TypeError(f"WeightStrategy.extract_weights: source must be an nn.Module, a TensorDict or a "
                            f"state dict, got {type(source).__name__}")
        if isinstance(source, torch.nn.Module):
            weights = TensorDict.from_module(source)
            extra = _extra_state(source)
            if extra:
                weights[EXTRA_STATE_KEY] = TensorDict(dict(extra))
            return weights
        if isinstance(source, TensorDictBase):
            return source
        return as_weights(source)

    def apply_weights(self, destination, weights, inplace: bool = True) -> None:
        """Write ``weights`` (a TensorDict or a state dict; None does nothing) into ``destination``
        (a module, a TensorDict or a state dict; only a module takes ``inplace=False``)."""
        if weights is None:
            return
        weights = as_weights(weights)
        extra = None
        if EXTRA_STATE_KEY in weights.keys():
            extra = weights[EXTRA_STATE_KEY].clone().flatten_keys(".").to_dict()
            weights = weights.exclude(EXTRA_STATE_KEY)
        if isinstance(destination, torch.nn.Module):
            own = TensorDict.from_module(destination)
            if inplace:
                copy_weights(own, weights)
            else:
                _as_own_tensors(match_weights(own, weights), own).to_module(destination)
            if extra is not None:
                destination.set_extra_state(extra)
            return
        if not isinstance(destination, (TensorDictBase, Mapping)):
            raise TypeError(f"WeightStrategy.apply_weights: destination must be an nn.Module, a TensorDict or a "
                            f"state dict, got {type(destination).__name__}")
        if not inplace:
            raise ValueError("WeightStrategy.apply_weights: a TensorDict or state dict destination is updated in "
                             "place only; leave inplace=True")
        copy_weights(destination if isinstance(destination, TensorDictBase) else as_weights(destination), weights)


#: where ``WeightStrategy`` keeps a module's ``get_extra_state()`` among its weights (TorchRL's key)
EXTRA_STATE_KEY = "__extra_state__"


def _extra_state(module: torch.nn.Module):
    if type(module).get_extra_state is torch.nn.Module.get_extra_state:  # the default raises
        return None
    return module.get_extra_state()


def _as_own_tensors(weights: TensorDictBase, own: TensorDictBase) -> TensorDictBase:
    """``weights`` with each leaf an ``nn.Parameter`` where ``own`` has one (``to_module`` then
    keeps the module's parameters parameters)."""
    def wrap(value, current):
        if isinstance(current, torch.nn.Parameter):
            return torch.nn.Parameter(value, requires_grad=current.requires_grad)
        return value

    return weights.apply(wrap, own)


class WeightUpdaterBase:
    """Pushes weights from the trainer to a collector (or to some of its workers)."""

    collector = None

    def register_collector(self, collector) -> None:
        self.collector = collector

    def push_weights(self, weights=None, worker_ids=None) -> None:
        raise NotImplementedError

    def __call__(self, weights=None, worker_ids=None) -> None:
        self.push_weights(weights, worker_ids=worker_ids)


class VanillaWeightUpdater(WeightUpdaterBase):
    """Copy weights into an in-process policy.

    Passed as ``weight_updater=`` to a collector, ``push_weights(weights)`` updates what that
    collector runs: the in-process policy, or every worker of a multi-process collector (whose
    own updater it then drives). ``push_weights()`` with no weights reads them from
    ``weight_getter``, else from the collector's own ``policy`` when the collector runs a copy of
    it; with nowhere to read them from it raises, rather than leaving the old weights in place.

    Args:
        weight_getter: called when ``push_weights()`` gets no weights (returns the new weights).
        policy_weights: the policy (module) or its TensorDict of parameters to write into.
    """

    def __init__(self, *, weight_getter: Callable | None = None, policy_weights=None):
        self.weight_getter = weight_getter
        self.policy_weights = None if policy_weights is None else as_weights(policy_weights)

    def register_collector(self, collector) -> None:
        super().register_collector(collector)
        if self.policy_weights is None and isinstance(collector.policy, torch.nn.Module):
            self.policy_weights = as_weights(collector.policy)

    def push_weights(self, weights=None, worker_ids=None) -> None:
        if weights is None and self.weight_getter is not None:
            weights = self.weight_getter()
        collector = self.collector
        driver = getattr(collector, "weight_updater", self)
        if driver is not self:  # a remote collector wraps this updater in its own: push through it
            driver.push_weights(weights, worker_ids=worker_ids)
            return
        if worker_ids not in (None, 0, [0]):
            raise ValueError(f"worker_ids={worker_ids!r}: an in-process collector has only worker 0")
        if weights is None:
            source = getattr(collector, "_source_policy", None)
            if source is not None and source is getattr(collector, "policy", None):
                return  # the collector runs the trainer's module itself: it has the weights already
            if source is None:
                raise ValueError(
                    "VanillaWeightUpdater.push_weights: no weights given, no weight_getter and no "
                    "policy to read them from; pass the weights (push_weights(policy_or_weights)) "
                    "or build the updater with weight_getter="
                )
            weights = source
        if self.policy_weights is None:
            raise RuntimeError("VanillaWeightUpdater: no policy to update (pass policy_weights=)")
        copy_weights(self.policy_weights, as_weights(weights))


def policy_weights(policy) -> TensorDictBase | None:
    """The parameters and buffers of ``policy`` as a TensorDict sharing their storage; None when
    ``policy`` is not a module or has none.

    Examples:
        >>> import torch
        >>> policy_weights(torch.nn.Linear(2, 1))["weight"].shape, policy_weights(lambda td: td)
        (torch.Size([1, 2]), None)
    """
    if isinstance(policy, torch.nn.Module):
        weights = as_weights(policy)
        return weights if not weights.is_empty() else None
    return None


def _update_policy(collector, payload) -> None:
    collector.update_policy_weights_(payload)


#: TorchRL's backend names (``WeightSyncScheme.from_backend``) and the reap scheme each picks.
_BACKEND_SCHEMES = {"none": "none", "direct": "none", "shared": "shared_mem", "thread": "shared_mem",
                    "process": "pipe", "multiprocessing": "pipe", "distributed": "distributed", "rpc": "rpc",
                    "ray": "ray"}


class WeightSyncScheme:
    """How a multi-worker collector moves the trainer's weights into its workers' policies.

    Workers load new weights only between two rollouts, and each batch records the version it
    was collected with. A scheme either has its payload carried by each worker's next collect
    request (``carried = True``: :meth:`pack` once per update, the worker loads it with
    :meth:`applier`; Ray, RPC, threads), or writes the weights to the workers at once, out of
    band (``carried = False``: :meth:`push`; each worker's :class:`WeightReceiver`, from
    :meth:`worker_state`, loads them when its next rollout starts; reap-collectors-mp's shared
    memory). A backend registers its schemes through ``reap_register_weight_sync_schemes`` and
    finds the one a user asked for with :func:`resolve_weight_sync_scheme`.

    Examples:
        >>> import torch
        >>> scheme = WeightSyncScheme()
        >>> payload = scheme.pack(torch.nn.Linear(2, 1))   # a detached copy, taken once per update
        >>> sorted(payload.keys())
        ['bias', 'weight']
    """

    name = "base"
    carried = True
    #: False for :class:`NoWeightSyncScheme`: ``update_policy_weights_`` leaves the workers' policies.
    synchronises = True
    #: set by :meth:`init_on_sender`: the model id and the weight layout the workers must have
    model_id: str | None = None
    _sender_layout: TensorDictBase | None = None

    def __init__(self, **options):
        self.options = options
        self._buffers: dict[int, TensorDictBase | None] = {}

    def init_on_sender(self, model=None, *, model_id: str = "policy", devices=None, params_map=None,
                       **kwargs) -> None:
        """TorchRL's sender-side set-up, before the collector is built. reap's collector binds the
        scheme to its workers itself; this records ``model_id`` and ``model``'s weight layout, and
        each worker's policy is checked against it as it starts (a mismatch names the entry).
        ``devices`` and ``params_map`` (where TorchRL places each worker's copy) are taken as given.

        Examples:
            >>> import torch
            >>> scheme = WeightSyncScheme()
            >>> scheme.init_on_sender(model=torch.nn.Linear(3, 1), model_id="policy")
            >>> scheme.check_worker_layout(0, TensorDict.from_module(torch.nn.Linear(2, 1)).data.to("meta"))
            Traceback (most recent call last):
            ...
            ValueError: WeightSyncScheme: worker 0's policy does not match the model given to init_on_sender: the weights' 'weight' has shape (1, 3) but the policy's has shape (1, 2); ...
        """
        if kwargs:
            raise TypeError(f"{type(self).__name__}.init_on_sender got unexpected keyword arguments {sorted(kwargs)}")
        if model_id != "policy":
            raise ValueError(f"{type(self).__name__}.init_on_sender: model_id={model_id!r}; reap's collectors "
                             "synchronise one model, 'policy'")
        self.model_id = model_id
        self._sender_layout = None if model is None else as_weights(model).to("meta")

    def check_worker_layout(self, idx: int, layout: TensorDictBase | None) -> None:
        """Worker ``idx``'s policy weights (on ``"meta"``) against the layout of
        :meth:`init_on_sender`'s model, if one was given."""
        if self._sender_layout is None or layout is None:
            return
        try:
            match_weights(layout, self._sender_layout)
        except ValueError as exc:
            raise ValueError(f"{type(self).__name__}: worker {idx}'s policy does not match the model given to "
                             f"init_on_sender: {exc}") from None

    @classmethod
    def from_backend(cls, backend: str, **kwargs) -> WeightSyncScheme:
        """The scheme of a deployment backend, as TorchRL's ``WeightSyncScheme.from_backend``:
        ``"none"`` (alias ``"direct"``), ``"shared"`` (``"thread"``), ``"process"``
        (``"multiprocessing"``), ``"distributed"``, ``"rpc"``, ``"ray"``, or a scheme name reap's
        plugins register (``"threads"``); ``kwargs`` go to the scheme's constructor. A scheme whose
        package is not installed is an error naming the package.

        Examples:
            >>> WeightSyncScheme.from_backend("direct").name
            'none'
            >>> WeightSyncScheme.from_backend("gpu")
            Traceback (most recent call last):
            ...
            ValueError: WeightSyncScheme.from_backend: unsupported backend 'gpu'; expected one of ['direct', 'distributed', 'multiprocessing', 'none', 'process', 'ray', 'rpc', 'shared', 'thread'] or a registered scheme name
        """
        from reap.plugins import get_registries, get_weight_sync_scheme

        name = _BACKEND_SCHEMES.get(backend, backend)
        if not isinstance(name, str) or (name not in _BACKEND_SCHEMES.values()
                                         and name not in get_registries().weight_sync_schemes):
            raise ValueError(f"WeightSyncScheme.from_backend: unsupported backend {backend!r}; expected one of "
                             f"{sorted(_BACKEND_SCHEMES)} or a registered scheme name")
        return get_weight_sync_scheme(name).cls(**kwargs)

    # ---- carried by each request -----------------------------------------------------------
    def pack(self, weights):
        """The weights (checked against the policy's layout) as a request carries them."""
        return as_weights(weights).detach().to("cpu").clone()

    @staticmethod
    def applier(collector) -> Callable:
        """In the worker: ``apply(collector, payload)`` loads a request's payload, between rollouts."""
        return _update_policy

    # ---- pushed out of band ----------------------------------------------------------------
    def bind(self, num_workers: int, send: Callable[[int, tuple], None], **transport) -> None:
        """Attach to a collector: ``send(idx, message)`` reaches worker ``idx``; ``transport``
        holds what the backend offers (reap-collectors-mp: ``context``)."""
        self._send = send

    def worker_state(self, idx: int) -> WeightReceiver:
        """What worker ``idx`` receives when it starts: its :class:`WeightReceiver`."""
        return WeightReceiver()

    def on_worker_ready(self, idx: int, buffer) -> None:
        """Worker ``idx`` (re)started; ``buffer`` is what its receiver's ``attach`` returned."""
        self._buffers[idx] = buffer

    def has_weights(self, idx: int) -> bool:
        return self._buffers.get(idx) is not None

    def push(self, weights: TensorDictBase, worker_ids: list[int], version: int) -> None:
        """Write ``weights`` to ``worker_ids`` now; each loads them before its next rollout."""
        raise NotImplementedError(f"{type(self).__name__} carries weights with each request: use pack()")

    def close(self) -> None:
        self._buffers.clear()

    def __repr__(self) -> str:
        return f"{type(self).__name__}()"


class NoWeightSyncScheme(WeightSyncScheme):
    """No weight synchronisation (TorchRL's ``"none"`` backend): ``update_policy_weights_`` does
    nothing and each worker keeps the policy it started with. Every multi-worker collector takes it.

    Examples:
        >>> scheme = WeightSyncScheme.from_backend("none")
        >>> type(scheme).__name__, scheme.synchronises
        ('NoWeightSyncScheme', False)
    """

    name = "none"
    synchronises = False

    def pack(self, weights):
        return None


class WeightReceiver:
    """A worker's side of an out-of-band scheme: its policy's weights and their version.

    ``poll()`` (called by :class:`~reap.collectors.worker.CollectorWorker` before each rollout)
    loads what arrived and returns the version the next rollout runs; ``apply(message)`` takes
    weights that came as a message of the worker's channel.

    Examples:
        >>> import torch
        >>> receiver = WeightReceiver()
        >>> receiver.attach(torch.nn.Linear(2, 1)) is None, receiver.poll()
        (True, 0)
    """

    def __init__(self):
        self.local: TensorDictBase | None = None
        self.version = 0

    def attach(self, policy):
        """Hold ``policy``'s weights (``local``); return what the driver writes into (None)."""
        self.local = policy_weights(policy)
        return None

    def poll(self) -> int:
        return self.version

    def apply(self, message) -> None:
        """A ``("weights", arrays, version)`` message: copy the arrays into the policy."""
        _, arrays, version = message
        if self.local is not None:
            copy_weights(self.local, as_weights({k: torch.from_numpy(v) for k, v in arrays.items()}))
        self.version = version


def resolve_weight_sync_scheme(value, owner: str, *, default: type, accepts: tuple[type, ...]) -> WeightSyncScheme:
    """The scheme a collector uses for ``weight_sync_schemes=value``: ``default()`` for None, a
    scheme instance, a registered name (``"shared_mem"``), or TorchRL's ``{"policy": ...}`` of
    either; it must be one of ``accepts`` (what the backend can move), else an error naming them.

    Examples:
        >>> resolve_weight_sync_scheme({"policy": None}, "C", default=WeightSyncScheme,
        ...                            accepts=(WeightSyncScheme,)).name
        'base'
        >>> resolve_weight_sync_scheme({"critic": None}, "C", default=WeightSyncScheme, accepts=(WeightSyncScheme,))
        Traceback (most recent call last):
        ...
        ValueError: C: weight_sync_schemes has models ['critic']; only 'policy' is synchronised
    """
    from reap.plugins import get_weight_sync_scheme

    if isinstance(value, Mapping):
        unknown = set(value) - {"policy"}
        if unknown:
            raise ValueError(f"{owner}: weight_sync_schemes has models {sorted(unknown)}; only 'policy' is synchronised")
        value = value.get("policy")
    if value is None:
        return default()
    if isinstance(value, str):
        value = get_weight_sync_scheme(value).cls()
    if not isinstance(value, (*accepts, NoWeightSyncScheme)):
        names = " or ".join(f"{cls.__name__}() ({cls.name!r})" for cls in accepts)
        raise ValueError(f"{owner}: weight_sync_schemes must be {names}, alone or as {{'policy': scheme}}; "
                         f"got {value!r}")
    return value


#: Names of other packages under TorchRL's path (``from reap.weight_update import SharedMemWeightSyncScheme``).
__getattr__ = module_getattr(__name__)
