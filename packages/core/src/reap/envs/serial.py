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
from reap.specs.non_tensor import NonTensor
from reap.specs.stacked import Stacked, StackedComposite


def make_envs(num_workers: int, create_env_fn, create_env_kwargs=None) -> list[EnvBase]:
    """Build ``num_workers`` envs from one callable or a list of callables (one per env)."""
    if not isinstance(num_workers, int) or num_workers < 1:
        raise ValueError(f"num_workers must be a positive int, got {num_workers!r}")
    fns = create_env_fn if isinstance(create_env_fn, Sequence) else [create_env_fn] * num_workers
    if len(fns) != num_workers:
        raise ValueError(
            f"create_env_fn has {len(fns)} callables but num_workers={num_workers}; pass one "
            "callable or exactly num_workers of them"
        )
    kwargs_list = create_env_kwargs if isinstance(create_env_kwargs, Sequence) else [
        create_env_kwargs or {}
    ] * num_workers
    envs = []
    for fn, kwargs in zip(fns, kwargs_list):
        if not callable(fn):
            raise TypeError(f"create_env_fn must be callable (a function returning an env), got {fn!r}")
        refuse_torchrl_env(fn, "SerialEnv")
        envs.append(checked_env(fn(**kwargs), "SerialEnv"))
    return envs


def sub_env_layout(env: EnvBase) -> tuple:
    """What sub-envs batched together must share: batch size, and each array's key, shape and dtype."""
    specs = {**env.root_specs(), **{("next", k): v for k, v in env.next_specs().items()}}
    return tuple(env.batch_size), {k: (tuple(v.shape), v.dtype) for k, v in specs.items()}


def needs_tensordicts(env: EnvBase) -> bool:
    """Whether ``env`` has an entry no step array can hold: a heterogeneous (lazy-stacked) one or a
    non-tensor one (a string, say)."""
    return any(isinstance(sub, (Stacked, StackedComposite, NonTensor))
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


class SerialEnv(EnvBase):
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
        self.envs = make_envs(num_workers, create_env_fn, create_env_kwargs)
        first = self.envs[0]
        for env in self.envs[1:]:
            if sub_env_layout(env) != sub_env_layout(first):
                raise ValueError(
                    "SerialEnv: every sub-env must have the same batch size and keys, with the same "
                    f"shapes and dtypes; {env!r} differs from {first!r}"
                )
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
        of their values, or for a method a callable returning each one's result (``env.limit``:
        ``[2.0, 3.0]``). Names starting with ``_`` are not forwarded."""
        envs = self.__dict__.get("envs")
        if envs is None or name.startswith("_"):
            raise no_attribute(self, name)
        try:
            values = [getattr(env, name) for env in envs]
        except AttributeError:
            raise no_attribute(self, name, ", nor have its sub-envs") from None
        if callable(values[0]):
            return forwarded_method(name, lambda *args, **kwargs: [value(*args, **kwargs) for value in values])
        return values

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
