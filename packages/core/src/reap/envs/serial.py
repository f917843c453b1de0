"""``SerialEnv``: several environments stepped one after the other in this process.

Examples:
    >>> from reap.envs import GymEnv, SerialEnv
    >>> env = SerialEnv(3, lambda: GymEnv("CartPole-v1"))
    >>> env.reset()["observation"].shape
    torch.Size([3, 4])
    >>> env.close()
"""

from __future__ import annotations

from collections.abc import Callable, Sequence

import torch
from tensordict import LazyStackedTensorDict

from reap.envs.base import EnvBase, checked_env, refuse_torchrl_env
from reap.specs.non_tensor import holds_non_tensor
from reap.specs.stacked import Stacked, StackedComposite


class NumWorkersMismatch(ValueError, RuntimeError):
    """A per-worker list whose length is not ``num_workers``: a ValueError, and the RuntimeError
    TorchRL raises there, so code catching either keeps working."""


def per_worker(value, num_workers: int, name: str, owner: str, what: str) -> list:
    """``value`` once per worker: a list or tuple must have ``num_workers`` entries (``what``:
    what they are, for the error), anything else repeats.

    Examples:
        >>> per_worker(None, 2, "create_env_kwargs", "SerialEnv", "dicts")
        [None, None]
        >>> per_worker([{}], 2, "create_env_kwargs", "SerialEnv", "dicts")
        Traceback (most recent call last):
        ...
        reap.envs.serial.NumWorkersMismatch: SerialEnv: len(create_env_kwargs) and num_workers mismatch: create_env_kwargs has 1 dicts but num_workers=2; pass one, or exactly num_workers of them
    """
    if not isinstance(value, (list, tuple)):
        return [value] * num_workers
    if len(value) != num_workers:
        raise NumWorkersMismatch(
            f"{owner}: len({name}) and num_workers mismatch: {name} has {len(value)} {what} but "
            f"num_workers={num_workers}; pass one, or exactly num_workers of them"
        )
    return list(value)


def _kwargs_dicts(values: list, name: str, owner: str) -> list[dict]:
    """Each of ``values`` (a dict, or None for none) as a dict of its own; else a TypeError."""
    for value in values:
        if value is not None and not isinstance(value, dict):
            raise TypeError(f"{owner}: {name} must be a dict or a list of num_workers dicts, got {value!r}")
    return [dict(value or {}) for value in values]


def env_kwargs(create_env_kwargs, num_workers: int, owner: str) -> list[dict]:
    """Each worker's own copy of its constructor's keyword arguments (:meth:`SerialEnv.update_kwargs`
    changes them one by one)."""
    values = per_worker(create_env_kwargs, num_workers, "create_env_kwargs", owner, "dicts")
    return _kwargs_dicts(values, "create_env_kwargs", owner)


def updated_kwargs(current: list[dict], kwargs, owner: str) -> list[dict]:
    """TorchRL's ``update_kwargs``: one dict updates every worker's keyword arguments, a list of
    ``num_workers`` dicts each one's."""
    new = _kwargs_dicts(per_worker(kwargs, len(current), "kwargs", owner, "dicts"), "kwargs", owner)
    return [{**old, **kw} for old, kw in zip(current, new)]


def make_envs(fns: list, kwargs: list[dict]) -> list[EnvBase]:
    """Build one env per constructor in ``fns``, each with its keyword arguments."""
    envs = []
    for fn, kw in zip(fns, kwargs):
        if not callable(fn):
            raise TypeError(f"create_env_fn must be callable (a function returning an env), got {fn!r}")
        refuse_torchrl_env(fn, "SerialEnv")
        envs.append(checked_env(fn(**kw), "SerialEnv"))
    return envs


def sub_env_layout(env: EnvBase) -> tuple:
    """What sub-envs batched together must share: batch size, and each array's key, shape and dtype."""
    specs = {**env.root_specs(), **{("next", k): v for k, v in env.next_specs().items()}}
    return tuple(env.batch_size), {k: (tuple(v.shape), v.dtype) for k, v in specs.items()}


def needs_tensordicts(env: EnvBase) -> bool:
    """Whether ``env`` has an entry no step array can hold: a heterogeneous (lazy-stacked) one, a
    non-tensor one (a string, say) or one with a dynamic (``-1``) dim, or resets itself (an
    ``AutoResetEnv``)."""
    return env._resets_itself or any(
        isinstance(sub, (Stacked, StackedComposite)) or holds_non_tensor(sub) or -1 in sub.shape
        for spec in (env.output_spec, env.input_spec) for _, sub in spec.items(True))


def split_reset(env: EnvBase, tensordict) -> list:
    """What each sub-env of the batched ``env`` resets with: False (not reset: its ``_reset``
    entries are False), None (no input) or its reset flags and state from ``tensordict``."""
    mask = None if tensordict is None else env._reset_mask(tensordict)
    keys = [*env.reset_keys, *env.full_state_spec.keys(True, True)]
    subs = []
    for i in range(env.batch_size[0]):
        if mask is not None and not mask[i].any():
            subs.append(False)
            continue
        sub = None if tensordict is None else tensordict[i].select(*keys, strict=False)
        subs.append(None if sub is None or sub.is_empty() else sub)
    return subs


def split_step(tensordict) -> list[tuple]:
    """``(input, stepped)`` per sub-env: its rows of ``tensordict`` and whether a ``_step`` entry
    (TorchRL's partial steps) selects it."""
    partial = tensordict.get("_step", None)
    out = []
    for i in range(tensordict.batch_size[0]):
        sub = tensordict[i].exclude("_step", "next")
        if partial is not None and partial[i].any() and not partial[i].all():  # a batched sub-env, stepped in part
            sub.set("_step", partial[i])
        out.append((sub, partial is None or bool(partial[i].any())))
    return out


def stack_sub_envs(outs: list) -> LazyStackedTensorDict:
    """The sub-envs' TensorDicts lazy-stacked (their groups need not stack); a None is zeros like
    the others (a sub-env not reset: ``reset`` keeps its rows)."""
    given = next(out for out in outs if out is not None)
    return LazyStackedTensorDict.lazy_stack([given.apply(torch.zeros_like) if out is None else out for out in outs], 0)


def no_attribute(owner, name: str, why: str = "") -> AttributeError:
    return AttributeError(f"{type(owner).__name__!r} object has no attribute {name!r}{why}")


def forwarded_method(name: str, call_all: Callable[..., list]) -> Callable[..., list]:
    """A sub-env method called through its batched env (TorchRL's forwarding): ``call_all`` runs
    it in every sub-env and returns their results in order."""
    def call(*args, **kwargs) -> list:
        return call_all(*args, **kwargs)
    call.__name__ = call.__qualname__ = name
    return call


class ForwardedValues(list):
    """The sub-envs' values of an attribute, in sub-env order; an attribute of it is asked of
    every sub-env the same way, so chains read through (TorchRL's ``env.nested.value``, and
    ``env.nested.get_value()`` runs in each sub-env).

    ``ask(path)`` resolves an attribute path (a tuple of names) in every sub-env. A copy or a
    pickle is a plain list.

    Examples:
        >>> values = ForwardedValues([1, 2], ("count",), lambda path: path)
        >>> values, values.real
        ([1, 2], ('count', 'real'))
    """

    def __init__(self, values, path: tuple, ask: Callable[[tuple], object]):
        super().__init__(values)
        self._path, self._ask = path, ask

    def __getattr__(self, name: str):
        if name.startswith("_"):
            raise AttributeError(name)
        return self._ask((*self._path, name))

    def __reduce__(self):
        return list, (list(self),)


def resolve(obj, path: tuple):
    """``obj.a.b`` for ``path == ("a", "b")``."""
    for name in path:
        obj = getattr(obj, name)
    return obj


#: The specs a batch of sub-envs takes from its first sub-env, each expanded by the number of sub-envs.
FULL_SPECS = ("full_observation_spec", "full_action_spec", "full_reward_spec", "full_done_spec", "full_state_spec")


#: TorchRL's ``SerialEnv`` keywords that tune its buffers and processes: one process, no buffers here.
_TUNING = ("pin_memory", "share_individual_td", "shared_memory", "memmap", "num_threads", "num_sub_threads",
           "non_blocking", "mp_start_method", "use_buffers", "metadata_from_workers", "consolidate", "daemon",
           "shutdown_timeout", "serial_for_single")
#: TorchRL's keywords reap takes at these values only, and what to do instead.
_ONLY = {
    "policy_proof": (None, "reap's envs take any policy; leave it out"),
    "allow_step_when_done": (False, "reap's envs are reset when done; leave it out"),
}


class SubEnvFactories:
    """TorchRL's public attributes of a batched env: what each sub-env is built with (one entry
    per worker; ``create_env_kwargs`` as ``update_kwargs`` left them)."""

    @property
    def create_env_fn(self) -> list:
        return self._create_env_fn

    @property
    def create_env_kwargs(self) -> list[dict]:
        return self._env_kwargs


class SerialEnv(SubEnvFactories, EnvBase):
    """Batch ``num_workers`` envs (batch ``[num_workers, *env.batch_size]``) in one process.

    TorchRL's keyword arguments are taken; those tuning its buffers and worker processes
    (``shared_memory``, ``num_threads``, ...) change nothing here, ``device`` is None or the
    CPU, and ``policy_proof`` and ``allow_step_when_done`` only at their defaults.
    """

    def __init__(self, num_workers: int, create_env_fn: Callable | Sequence[Callable], *,
                 create_env_kwargs=None, device=None, **kwargs):
        unknown = sorted(set(kwargs) - set(_TUNING) - set(_ONLY))
        if unknown:
            raise TypeError(f"SerialEnv got unexpected keyword arguments {unknown}")
        for name, (default, instead) in _ONLY.items():
            if kwargs.get(name, default) is not default:
                raise ValueError(f"SerialEnv: {name}={kwargs[name]!r} is not supported ({instead})")
        if device is not None and torch.device(device).type != "cpu":
            raise ValueError(f"SerialEnv: device={device!r} is not supported; reap's envs step on the CPU (move "
                             "batches with the collector's storing_device)")
        if isinstance(num_workers, bool) or not isinstance(num_workers, int) or num_workers < 1:
            raise ValueError(f"SerialEnv: num_workers must be a positive int, got {num_workers!r}")
        self._create_env_fn = per_worker(create_env_fn, num_workers, "create_env_fn", "SerialEnv", "callables")
        self._env_kwargs = env_kwargs(create_env_kwargs, num_workers, "SerialEnv")
        self._start()
        first = self.envs[0]
        batch = (num_workers, *first.batch_size)
        super().__init__(batch_size=batch, device=first.device if device is None else device)
        for name in FULL_SPECS:
            spec = getattr(first, name)
            setattr(self, name, spec.expand(num_workers, *spec.shape))
        plain_root, plain_next = EnvBase.root_specs(self), EnvBase.next_specs(self)
        self._extra_root = {k: v for k, v in first.root_specs().items() if k not in plain_root}
        self._extra_next = {k: v for k, v in first.next_specs().items() if k not in plain_next}
        self._views: dict[int, tuple[dict, list[dict]]] = {}
        #: heterogeneous (lazy-stacked) or non-tensor entries, which no array holds: step on TensorDicts
        self._on_tensordicts = needs_tensordicts(first) or first._skips_steps

    def _start(self) -> None:
        """Build the sub-envs (again after :meth:`close` or :meth:`update_kwargs`: they must have
        the first ones' layout)."""
        envs = make_envs(self._create_env_fn, self._env_kwargs)
        rebuilt = "_layout" in self.__dict__
        layout = self._layout if rebuilt else sub_env_layout(envs[0])
        for env in envs:
            if sub_env_layout(env) != layout:
                for built in envs:
                    built.close()
                raise ValueError(
                    "SerialEnv: every sub-env must have the same batch size and keys, with the same "
                    f"shapes and dtypes; {env!r} differs from "
                    + ("the sub-envs it was built with" if rebuilt else repr(envs[0]))
                )
        self.envs, self._layout, self.is_closed = envs, layout, False

    def update_kwargs(self, kwargs: dict | Sequence[dict]) -> None:
        """Update the sub-envs' constructor keyword arguments (TorchRL's): a dict updates every
        worker's, a list of ``num_workers`` dicts each one's. The sub-envs are rebuilt with them
        now (reap builds them at construction; TorchRL, which builds them at its first reset,
        uses them there).

        Examples:
            >>> from reap.envs import GymEnv, SerialEnv
            >>> env = SerialEnv(2, GymEnv, create_env_kwargs={"env_name": "CartPole-v1"})
            >>> env.update_kwargs([{}, {"env_name": "CartPole-v0"}])
            >>> env.env_name
            ['CartPole-v1', 'CartPole-v0']
            >>> env.close()
        """
        self._env_kwargs = updated_kwargs(self._env_kwargs, kwargs, "SerialEnv")
        if not self.is_closed:
            for env in self.envs:
                env.close()
            self._start()

    def start(self) -> None:
        """TorchRL's: start the sub-envs if they are not running. reap's start at construction, so
        this only builds a closed env's sub-envs again, as :meth:`reset` does."""
        if self.is_closed:
            self._start()

    def reset(self, tensordict=None, **kwargs):
        """:meth:`EnvBase.reset`; a closed SerialEnv builds its sub-envs again first (TorchRL's)."""
        self.start()
        return super().reset(tensordict, **kwargs)

    @property
    def _torchrl_style(self) -> bool:
        return self._on_tensordicts

    @property
    def _skips_steps(self) -> bool:
        return self.envs[0]._skips_steps

    @property
    def _use_buffers(self) -> bool:
        """TorchRL's flag: whether the sub-envs step through preallocated buffers (reap's arrays)."""
        return not self._on_tensordicts

    def _reset(self, tensordict=None, **kwargs):
        """Reset the sub-envs the ``_reset`` entries select (all without), each by its ``reset``."""
        subs = split_reset(self, tensordict)
        return stack_sub_envs([None if sub is False else env.reset(sub, **kwargs) for env, sub in zip(self.envs, subs)])

    def _step(self, tensordict):
        """Step each sub-env by its ``step`` (those a ``_step`` entry selects; the others' ``"next"``
        is their root's, as a skipped env's)."""
        outs = [env.step(sub).get("next") if stepped else env._skip_tensordict(sub)
                for env, (sub, stepped) in zip(self.envs, split_step(tensordict))]
        return stack_sub_envs(outs)

    @property
    def _steps_with_grad(self) -> bool:
        """Sub-envs written the TorchRL way pass the gradient through their ``_step``, as through
        TorchRL's SerialEnv: :meth:`EnvBase.step` then steps them on TensorDicts (``_step``)."""
        return self.envs[0]._steps_with_grad

    def root_specs(self):
        specs = super().root_specs()
        specs.update({k: v.expand(len(self.envs), *v.shape) for k, v in self._extra_root.items()})
        return specs

    def next_specs(self):
        specs = super().next_specs()
        specs.update({k: v.expand(len(self.envs), *v.shape) for k, v in self._extra_next.items()})
        return specs

    @property
    def state_keys(self):
        return self.envs[0].state_keys

    @property
    def passthrough_keys(self):
        return self.envs[0].passthrough_keys

    @property
    def _recorded_root_keys(self) -> tuple:
        return self.envs[0]._recorded_root_keys

    def _primed_action_keys(self) -> tuple:
        return self.envs[0]._primed_action_keys()

    def _split(self, arrays: dict) -> list[dict]:
        """Per-sub-env views of ``arrays``, cached while the same arrays come back."""
        cached = self._views.get(id(arrays))
        if cached is None or cached[0] is not arrays:
            if len(self._views) > 4:  # the TensorDict API allocates new arrays per call
                self._views.clear()
            views = [{k: v[:, i] for k, v in arrays.items()} for i in range(len(self.envs))]
            cached = self._views[id(arrays)] = (arrays, views)
        return cached[1]

    def _reset_into(self, root, t, mask):
        for i, (env, sub_root) in enumerate(zip(self.envs, self._split(root))):
            if mask is None:
                env._reset_into(sub_root, t, None)
            elif mask[i].any():
                env._reset_into(sub_root, t, mask[i] if mask[i].ndim else None)

    def _step_into(self, action, t, root, nxt):
        # action is None for an env whose actions are all nested: each sub-env reads them from root
        subs = zip(self.envs, self._split(root), self._split(nxt))
        for i, (env, sub_root, sub_next) in enumerate(subs):
            env._step_into(None if action is None else action[i], t, sub_root, sub_next)

    def _partial_step_into(self, action, t, root, nxt, mask):
        # a sub-env whose mask is all False is not stepped at all (TorchRL's SerialEnv does so)
        subs = zip(self.envs, self._split(root), self._split(nxt))
        for i, (env, sub_root, sub_next) in enumerate(subs):
            sub_action = None if action is None else action[i]
            if mask[i].all():
                env._step_into(sub_action, t, sub_root, sub_next)
            elif mask[i].any():
                env._partial_step_into(sub_action, t, sub_root, sub_next, mask[i])

    def __getattr__(self, name: str):
        """A public attribute the batched env lacks is its sub-envs' (TorchRL's forwarding): a list
        of their values (:class:`ForwardedValues`: ``env.nested.value`` reads on), or for a method
        a callable returning each one's result (``env.limit``: ``[2.0, 3.0]``). Names starting
        with ``_`` are not forwarded."""
        envs = self.__dict__.get("envs")
        if not envs or name.startswith("_"):
            raise no_attribute(self, name)
        return self._forwarded((name,))

    def _forwarded(self, path: tuple):
        try:
            values = [resolve(env, path) for env in self.envs]
        except AttributeError:
            raise no_attribute(self, ".".join(path), ", nor have its sub-envs") from None
        if callable(values[0]):
            return forwarded_method(path[-1], lambda *args, **kwargs: [value(*args, **kwargs) for value in values])
        return ForwardedValues(values, path, self._forwarded)

    def _set_seed(self, seed):
        self.set_seed(seed)

    def set_seed(self, seed=None, static_seed=False):
        """Seed the sub-envs one after the other, each with the seed the one before returned (all
        with ``seed`` when ``static_seed``, as TorchRL's); returns the last one's next seed."""
        for env in self.envs:
            seed = env.set_seed(seed, static_seed=static_seed)
        return seed

    def close(self, *, raise_if_closed: bool = True) -> None:
        for env in self.envs:
            env.close()
        super().close()
