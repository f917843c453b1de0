"""``EnvCreator``: an env constructor that travels to worker processes (TorchRL's ``EnvCreator``).

Examples:
    >>> from reap.envs import GymEnv
    >>> from reap.envs.env_creator import EnvCreator
    >>> make = EnvCreator(lambda: GymEnv("Pendulum-v1"))
    >>> make.action_spec.shape
    torch.Size([1])
    >>> env = make()
    >>> env.rollout(2)["next", "observation"].shape
    torch.Size([2, 3])
    >>> EnvCreator(GymEnv, env_name="CartPole-v1").make_variant(num_envs=2)().batch_size
    torch.Size([2])
"""

from __future__ import annotations

import pickle
from collections.abc import Callable
from multiprocessing.context import get_spawning_popen
from multiprocessing.reduction import ForkingPickler
from multiprocessing.sharedctypes import Synchronized

import torch
import torch.multiprocessing  # noqa: F401  (registers torch's reductions with ForkingPickler)
from tensordict import TensorDictBase

from reap.envs.base import EnvBase, checked_env, refuse_torchrl_env
from reap.envs.done import replace_last


class EnvMetaData:
    """What an env looks like without the env (TorchRL's ``EnvMetaData``): ``EnvCreator.meta_data``.

    ``specs`` is the env's ``specs`` (``input_spec`` and ``output_spec``) on the CPU, ``tensordict`` a zeroed
    step (``fake_tensordict()`` with a ``"_reset"`` beside each done flag), ``batch_size``,
    ``device``, ``env_str`` (the env's ``repr``), ``batch_locked`` and ``device_map`` (each entry's
    device) as TorchRL's, ``supports_set_state`` False (reap has no ``set_state``).
    """

    def __init__(self, *, tensordict: TensorDictBase, specs, batch_size, env_str: str, device,
                 batch_locked: bool = True, device_map: dict | None = None, supports_set_state: bool = False):
        self.device = device
        self._tensordict = tensordict
        self._specs = specs
        self.batch_size = torch.Size(batch_size)
        self.env_str = env_str
        self.batch_locked = batch_locked
        self.device_map = {} if device_map is None else device_map
        self.supports_set_state = supports_set_state
        self.has_dynamic_specs = any(-1 in leaf.shape for leaf in specs.values(True, True) if leaf is not None)

    @property
    def tensordict(self) -> TensorDictBase:
        """A copy of the zeroed step (its entries are shared with the stored one, as TorchRL's)."""
        return self._tensordict.copy()

    @property
    def specs(self):
        return self._specs

    @staticmethod
    def metadata_from_env(env: EnvBase) -> EnvMetaData:
        tensordict = env.fake_tensordict().clone()
        for key in env.done_keys:
            tensordict.set(replace_last(key, "_reset"), torch.zeros_like(tensordict.get(("next", key))))
        device_map = {}
        tensordict.named_apply(lambda name, value: device_map.__setitem__(name, value.device), nested_keys=True,
                               filter_empty=True)
        try:
            env_str = str(env)
        except Exception:  # noqa: BLE001 - TorchRL's fallback for an env whose repr fails
            env_str = f"{type(env).__name__}()"
        return EnvMetaData(tensordict=tensordict, specs=env.specs.to("cpu"), batch_size=env.batch_size, env_str=env_str,
                           device=env.device, batch_locked=env.batch_locked, device_map=device_map)

    def _like(self, tensordict, specs, batch_size, device=None, device_map=None) -> EnvMetaData:
        return EnvMetaData(tensordict=tensordict, specs=specs, batch_size=batch_size, env_str=self.env_str,
                           device=self.device if device is None else device, batch_locked=self.batch_locked,
                           device_map=self.device_map if device_map is None else device_map,
                           supports_set_state=self.supports_set_state)

    def expand(self, *size: int) -> EnvMetaData:
        size = torch.Size(size[0] if len(size) == 1 and not isinstance(size[0], int) else size)
        return self._like(self.tensordict.expand(*size).clone(), self.specs.expand(*size), size)

    def clone(self) -> EnvMetaData:
        return self._like(self.tensordict.clone(), self.specs.clone(), self.batch_size)

    def to(self, device) -> EnvMetaData:
        if device is None:
            return self._like(self.tensordict, self.specs, self.batch_size)
        device = torch.device(device)
        return self._like(self.tensordict.contiguous().to(device), self.specs.to(device), self.batch_size, device,
                          {key: device for key in self.device_map})

    def __getitem__(self, item) -> EnvMetaData:
        tensordict = self.tensordict[item]
        return self._like(tensordict, self.specs[item], tensordict.batch_size)

    def __repr__(self) -> str:
        return (f"EnvMetaData(env_str={self.env_str!r}, batch_size={self.batch_size}, device={self.device}, "
                f"batch_locked={self.batch_locked})")


def _sharing_transforms(env) -> list:
    """The transforms of ``env`` whose statistics an ``EnvCreator`` shares, outermost env first."""
    return [t for t in _leaf_transforms(env)
            if hasattr(t, "_use_statistics") and getattr(t, "stateful", True)]  # stateless: in the data


def _leaf_transforms(env) -> list:
    """Every transform of ``env``, outermost env first, each ``Compose`` unrolled."""
    from reap.envs.transforms.transformed_env import TransformedEnv, leaves_of

    found = []
    while isinstance(env, TransformedEnv):
        found.extend(leaves_of(env.transform))
        env = env.base_env
    return found


def _mp_values(env) -> list:
    """``(transform index, attribute, value)`` for each ``mp.Value`` a transform of ``env`` holds
    (a ``TrajCounter``'s counter): what the envs an ``EnvCreator`` makes share, as TorchRL's."""
    return [(i, name, value) for i, t in enumerate(_leaf_transforms(env))
            for name, value in vars(t).items() if isinstance(value, Synchronized)]


class EnvCreator:
    """Wrap ``create_env_fn`` and its keyword arguments as a callable returning the env.

    The arguments are TorchRL's: ``create_env_kwargs`` and further ``**kwargs`` are the env's
    keyword arguments (they win over those a call passes, as in TorchRL), ``make_variant(**kw)``
    gives a creator with more of them. Pass it wherever a constructor is expected
    (``ParallelEnv(4, EnvCreator(make_env))``, ``MultiSyncCollector([EnvCreator(make_env)] * 2,
    ...)``); the env's specs (``observation_spec``, ``action_spec``, ..., ``meta_data``) are read
    from one instance, then closed, built at construction as TorchRL's (with ``share_memory=False``:
    on first access, or at ``init_()``).

    With ``share_memory=True`` (the default), as TorchRL's, the envs it makes share the statistics
    of their ``VecNorm``/``VecNormV2`` transforms: those of that first env, moved to shared memory,
    which worker processes inherit or get by handle (``ParallelEnv(4, EnvCreator(make_env))``),
    and the counters of their ``TrajCounter`` transforms (the first env's ``mp.Value``s; variants
    from ``make_variant`` share them too);
    ``state_dict()`` reads them, and count one reset and one random step of that first env, as
    TorchRL's. Without a lock (``VecNorm(lock=...)``) two processes updating them
    at the same moment may lose one update.
    """

    def __init__(self, create_env_fn: Callable[..., EnvBase], create_env_kwargs: dict | None = None,
                 share_memory: bool = True, **kwargs):
        refuse_torchrl_env(create_env_fn, "EnvCreator")
        if isinstance(create_env_fn, EnvBase) or not callable(create_env_fn):
            raise TypeError(
                f"EnvCreator: create_env_fn must be a callable returning an env, got {create_env_fn!r}"
            )
        if create_env_kwargs is not None and not isinstance(create_env_kwargs, dict):
            raise TypeError(f"EnvCreator: create_env_kwargs must be a dict of keyword arguments, got "
                            f"{create_env_kwargs!r}")
        self.create_env_fn = create_env_fn
        self.create_env_kwargs = {**kwargs, **(create_env_kwargs or {})}
        self._share_memory = share_memory
        self._specs: dict | None = None
        self._meta_data: EnvMetaData | None = None
        self._statistics: list | None = None  # per sharing transform of the first env, its statistics
        self._mp_values: list | None = None  # the first env's mp.Values, set on every env made
        if share_memory:  # before any worker starts, so that they all share the first env's statistics
            self.init_()

    def _make(self, **kwargs) -> EnvBase:
        return checked_env(self.create_env_fn(**{**kwargs, **self.create_env_kwargs}), "EnvCreator")

    def __call__(self, **kwargs) -> EnvBase:
        env = self._make(**kwargs)
        if self._share_memory:
            self._share_with(env)
        return env

    def _share_with(self, env: EnvBase) -> None:
        """Point ``env``'s normalisation transforms at the shared statistics."""
        transforms = _sharing_transforms(env)
        if len(transforms) != len(self._statistics):
            raise RuntimeError(f"EnvCreator: this env has {len(transforms)} transforms with statistics to share and "
                               f"the first one it made had {len(self._statistics)}; create_env_fn must build the same "
                               "transforms each time (or pass share_memory=False)")
        for transform, statistics in zip(transforms, self._statistics):
            transform._use_statistics(statistics)
        leaves = _leaf_transforms(env)
        for index, name, value in self._mp_values or ():
            if index < len(leaves) and isinstance(vars(leaves[index]).get(name), Synchronized):
                setattr(leaves[index], name, value)

    def state_dict(self) -> dict:
        """The ``state_dict`` of the envs it makes (their shared statistics with ``share_memory``)."""
        env = self()
        try:
            return env.state_dict()
        finally:
            env.close()

    def make_variant(self, **kwargs) -> EnvCreator:
        """A creator of the same env with these keyword arguments added (or replaced), sharing this
        one's statistics and counters (TorchRL's)."""
        variant = EnvCreator(self.create_env_fn, {**self.create_env_kwargs, **kwargs}, share_memory=False)
        variant._share_memory = self._share_memory
        variant._statistics, variant._mp_values = self._statistics, self._mp_values
        return variant

    def init_(self) -> EnvCreator:
        """Build one env now to read its specs (done on first access otherwise); returns self."""
        if self._specs is None:
            env = self._make()
            try:
                self._specs = {n: getattr(env, n) for n in (
                    "observation_spec", "action_spec", "reward_spec", "done_spec", "state_spec", "full_action_spec",
                    "full_observation_spec", "full_reward_spec", "full_done_spec", "batch_size")}
                if self._meta_data is None:
                    self._meta_data = EnvMetaData.metadata_from_env(env)
                if self._share_memory and self._statistics is None:
                    self._mp_values = _mp_values(env)
                    self._statistics = [t._share_statistics() for t in _sharing_transforms(env)]
                    if self._statistics:  # TorchRL's first env takes a reset and a step: they count
                        env.rand_step(env.reset())
            finally:
                env.close()
        return self

    @property
    def initialized(self) -> bool:
        return self._specs is not None

    def _spec(self, name: str):
        return self.init_()._specs[name]

    observation_spec = property(lambda self: self._spec("observation_spec"))
    action_spec = property(lambda self: self._spec("action_spec"))
    reward_spec = property(lambda self: self._spec("reward_spec"))
    done_spec = property(lambda self: self._spec("done_spec"))
    state_spec = property(lambda self: self._spec("state_spec"))
    full_action_spec = property(lambda self: self._spec("full_action_spec"))
    full_observation_spec = property(lambda self: self._spec("full_observation_spec"))
    full_reward_spec = property(lambda self: self._spec("full_reward_spec"))
    full_done_spec = property(lambda self: self._spec("full_done_spec"))
    batch_size = property(lambda self: self._spec("batch_size"))

    @property
    def meta_data(self) -> EnvMetaData:
        """The env's :class:`EnvMetaData` (specs, a zeroed step, batch size, device), read like the specs."""
        if self._meta_data is None:
            self.init_()
        return self._meta_data

    @meta_data.setter
    def meta_data(self, value: EnvMetaData) -> None:
        if not isinstance(value, EnvMetaData):
            raise TypeError(f"EnvCreator.meta_data must be an EnvMetaData, got {type(value).__name__}")
        self._meta_data = value

    def __getstate__(self):
        # mp.Values reach a starting process only (pickled elsewhere, each env made counts alone)
        values = self._mp_values if get_spawning_popen() is not None else None
        fn = self.create_env_fn
        if "<" in getattr(fn, "__qualname__", ""):  # a lambda or a local function: by value, as TorchRL's
            from reap.pickling import cloud_dumps

            # with the mp.Values in the same pass: a value the function holds too is sent once (a
            # child given one descriptor twice fails to start)
            fn, values = _ByValue(cloud_dumps((fn, values))), None
        statistics = self._statistics
        if statistics and get_spawning_popen() is not None:
            # a worker process is being started with it: send handles to the shared memory (plain
            # pickle, which its arguments may go through, would copy the tensors)
            statistics = _ByValue(bytes(ForkingPickler.dumps(statistics)))
        return {"create_env_fn": fn, "create_env_kwargs": self.create_env_kwargs,
                "_share_memory": self._share_memory, "_specs": None, "_meta_data": None, "_statistics": statistics,
                "_mp_values": values}

    def __setstate__(self, state) -> None:
        if isinstance(state["create_env_fn"], _ByValue):
            state["create_env_fn"], values = pickle.loads(state["create_env_fn"].payload)
            state["_mp_values"] = values if values is not None else state.get("_mp_values")
        if isinstance(state["_statistics"], _ByValue):
            state["_statistics"] = ForkingPickler.loads(state["_statistics"].payload)
        self.__dict__.update(state)

    def __repr__(self) -> str:
        return f"EnvCreator({self.create_env_fn!r}, create_env_kwargs={self.create_env_kwargs})"


class _ByValue:
    """A function pickled by value (its keyword arguments stay with the pickler that sends them)."""

    def __init__(self, payload: bytes):
        self.payload = payload
