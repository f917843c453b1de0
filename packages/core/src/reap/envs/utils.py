"""Env helpers under TorchRL's path ``torchrl.envs.utils``: ``step_mdp``, ``check_env_specs``,
``RandomPolicy``, ``ExplorationType``, ``exploration_type`` and ``set_exploration_type``.

Examples:
    >>> from reap.envs import GymEnv
    >>> from reap.envs.utils import check_env_specs, step_mdp
    >>> env = GymEnv("Pendulum-v1")
    >>> check_env_specs(env)
    >>> td = env.rand_step(env.reset())
    >>> sorted(step_mdp(td).keys())
    ['done', 'observation', 'terminated', 'truncated']
"""

from __future__ import annotations

import torch
from tensordict import LazyStackedTensorDict, TensorDict, TensorDictBase, is_tensor_collection
from tensordict.nn import InteractionType as ExplorationType
from tensordict.nn import set_interaction_type as set_exploration_type
from tensordict.nn.probabilistic import interaction_type as exploration_type
from tensordict.utils import is_non_tensor, unravel_key

from reap.envs.done import any_done
from reap.mirror import module_getattr
from reap.specs import Composite, Unbounded
from reap.specs.non_tensor import spec_of_non_tensor

__all__ = [
    "ExplorationType", "RandomPolicy", "check_env_specs", "exploration_type", "make_composite_from_td",
    "set_exploration_type", "step_mdp", "terminated_or_truncated",
]


class RandomPolicy:
    """A policy that draws its action from ``action_spec`` (TorchRL's ``RandomPolicy``).

    ``policy(td)`` writes ``action_spec.rand()`` at ``action_key`` (a ``Composite`` spec: all of
    its entries). Without a spec, a collector gives it the env's ``full_action_spec``.

    Examples:
        >>> from reap.envs import GymEnv
        >>> env = GymEnv("Pendulum-v1", num_envs=2)
        >>> RandomPolicy(env.action_spec)(env.reset())["action"].shape
        torch.Size([2, 1])
    """

    def __init__(self, action_spec=None, action_key="action"):
        self.action_spec = action_spec.clone() if action_spec is not None else None
        self.action_key = action_key

    def set_action_spec_from_env(self, env) -> None:
        """Take ``env.full_action_spec`` unless a spec was given (collectors call this). A spec
        given for one env (e.g. a single env's ``action_spec`` on a ``SerialEnv`` of them) is
        expanded to the env's batch, so each env draws its own action."""
        if self.action_spec is None:
            self.action_spec = env.full_action_spec.clone()
            return
        target = env.full_action_spec if isinstance(self.action_spec, Composite) else env.action_spec
        batch = tuple(env.batch_size)
        if batch and tuple(target.shape) == (*batch, *self.action_spec.shape):
            self.action_spec = self.action_spec.expand(*target.shape)

    def __call__(self, td: TensorDictBase) -> TensorDictBase:
        if self.action_spec is None:
            raise RuntimeError("RandomPolicy has no action_spec: pass RandomPolicy(env.action_spec), or "
                               "hand it to a collector, which gives it the env's")
        if isinstance(self.action_spec, Composite):
            return td.update(self.action_spec.rand())
        return td.set(self.action_key, self.action_spec.rand())


def make_composite_from_td(data: TensorDictBase, *, unsqueeze_null_shapes: bool = True,
                           dynamic_shape: bool = False) -> Composite:
    """A ``Composite`` of ``Unbounded`` specs shaped like ``data`` (TorchRL's helper): nested
    TensorDicts become nested Composites; a 0-dim entry gets shape ``(1,)`` unless
    ``unsqueeze_null_shapes=False``; ``dynamic_shape`` marks each last dim variable (``-1``).

    Examples:
        >>> import torch
        >>> from tensordict import TensorDict
        >>> spec = make_composite_from_td(TensorDict(g=torch.tensor(9.8), obs=torch.zeros(3)))
        >>> spec["g"].shape, spec["obs"].shape
        (torch.Size([1]), torch.Size([3]))
    """
    def shape_of(shape):
        if shape or not unsqueeze_null_shapes:
            return shape[:-1] + (-1,) if dynamic_shape and shape else shape
        return torch.Size([1])

    specs = {}
    for key, value in data.items():
        if is_non_tensor(value):  # TorchRL's NonTensor, the value as its example
            specs[key] = spec_of_non_tensor(value)
            continue
        specs[key] = make_composite_from_td(value, unsqueeze_null_shapes=unsqueeze_null_shapes,
                                            dynamic_shape=dynamic_shape) if is_tensor_collection(value) else \
            Unbounded(dtype=value.dtype, device=value.device, shape=shape_of(value.shape))
    return Composite(specs, shape=data.shape, data_cls=None if type(data) is TensorDict else type(data))


def terminated_or_truncated(data: TensorDictBase, full_done_spec: Composite | None = None, key: str | None = "_reset",
                            write_full_false: bool = False) -> bool:
    """Whether any env of ``data`` is done (TorchRL's helper); with ``key``, each done group gets
    that entry (what ``reset`` reads), kept only where something is done unless
    ``write_full_false``. The flags are those of ``full_done_spec``, or without it every
    ``"done"``, ``"terminated"`` and ``"truncated"`` entry of ``data``."""
    return any_done(data, full_done_spec, key=key, write_full_false=write_full_false)


def _key_list(keys) -> list:
    return keys if isinstance(keys, list) else [keys]


def step_mdp(tensordict: TensorDictBase, next_tensordict: TensorDictBase | None = None,
             keep_other: bool = True, exclude_reward: bool = True, exclude_done: bool = False,
             exclude_action: bool = True, reward_keys="reward", done_keys="done",
             action_keys="action") -> TensorDictBase:
    """The root of the next step: ``tensordict["next"]`` moved up (TorchRL's ``step_mdp``).

    The entries of ``"next"`` replace the root's; the root's other entries are kept
    (``keep_other``), nested ones merged key by key. ``reward_keys``, ``done_keys`` and
    ``action_keys`` (a key, nested keys as tuples, or a list of them) name what
    ``exclude_reward`` (default), ``exclude_done`` and ``exclude_action`` (default) leave out, on
    both levels; a sub-TensorDict left empty is dropped. With ``next_tensordict``, the result is
    written into it. A lazy stack is processed per stacked TensorDict.

    Examples:
        >>> import torch
        >>> from tensordict import TensorDict
        >>> td = TensorDict({"obs": torch.zeros(1), "action": torch.ones(1),
        ...                  "next": {"obs": torch.ones(1), "reward": torch.ones(1)}})
        >>> sorted(step_mdp(td).keys()), sorted(step_mdp(td, exclude_action=False).keys())
        (['obs'], ['action', 'obs'])
    """
    kwargs = dict(keep_other=keep_other, exclude_reward=exclude_reward, exclude_done=exclude_done,
                  exclude_action=exclude_action, reward_keys=reward_keys, done_keys=done_keys,
                  action_keys=action_keys)
    if isinstance(tensordict, LazyStackedTensorDict):
        nexts = [None] * len(tensordict.tensordicts) if next_tensordict is None else \
            next_tensordict.unbind(tensordict.stack_dim)
        out = LazyStackedTensorDict.lazy_stack(
            [step_mdp(td, ntd, **kwargs) for td, ntd in zip(tensordict.tensordicts, nexts)], tensordict.stack_dim)
        return out if next_tensordict is None else next_tensordict.update(out)
    excluded = set()
    for flag, keys in ((exclude_reward, reward_keys), (exclude_done, done_keys), (exclude_action, action_keys)):
        if flag:
            excluded.update(unravel_key(k) for k in _key_list(keys))
    nxt = tensordict.get("next")
    out = nxt.empty()
    if keep_other:
        for key in tensordict.keys():
            if key != "next":
                _copy_entry(tensordict, out, key, (), excluded)
    elif not exclude_action:
        for key in _key_list(action_keys):
            _copy_key(tensordict, out, unravel_key(key))
    for key in nxt.keys():
        _copy_entry(nxt, out, key, (), excluded)
    return out if next_tensordict is None else next_tensordict.update(out)


def _copy_entry(source: TensorDictBase, dest: TensorDictBase, key: str, prefix: tuple, excluded: set) -> bool:
    """Copy ``source[key]`` into ``dest`` but the ``excluded`` (full) keys; whether it copied any."""
    full = unravel_key((*prefix, key))
    if full in excluded:
        return False
    value = source.get(key)
    if not is_tensor_collection(value) or is_non_tensor(value):
        dest.set(key, value)
        return True
    sub = dest.get(key, None)
    if isinstance(value, LazyStackedTensorDict):  # member by member: their entries may differ in shape
        members = _lazy_members(value, sub)
        copied = False
        for member, into in zip(value.tensordicts, members):
            for inner in member.keys():
                copied = _copy_entry(member, into, inner, (*prefix, key), excluded) or copied
        if copied:
            dest.set(key, LazyStackedTensorDict.lazy_stack(members, value.stack_dim))
        return copied
    sub = value.empty() if sub is None else sub
    copied = False
    for inner in value.keys():
        copied = _copy_entry(value, sub, inner, (*prefix, key), excluded) or copied
    if copied:
        dest.set(key, sub)
    return copied


def _lazy_members(value: LazyStackedTensorDict, sub: TensorDictBase | None) -> list[TensorDictBase]:
    """What each member of the lazy stack ``value`` is copied into: the matching member of
    ``sub`` (what an earlier level wrote there), else an empty one."""
    if sub is None:
        return [member.empty() for member in value.tensordicts]
    if isinstance(sub, LazyStackedTensorDict) and sub.stack_dim == value.stack_dim:
        return list(sub.tensordicts)
    return [member.copy() for member in sub.unbind(value.stack_dim)]


def _copy_key(source: TensorDictBase, dest: TensorDictBase, key) -> None:
    """``dest[key] = source[key]`` for a nested ``key`` (nothing when ``source`` lacks it)."""
    parts = key if isinstance(key, tuple) else (key,)
    for depth, part in enumerate(parts[:-1]):
        value = source.get(part, None)
        if value is None:
            return
        sub = dest.get(part, None)
        if isinstance(value, LazyStackedTensorDict):
            members = _lazy_members(value, sub)
            for member, into in zip(value.tensordicts, members):
                _copy_key(member, into, parts[depth + 1:])
            dest.set(part, LazyStackedTensorDict.lazy_stack(members, value.stack_dim))
            return
        if sub is None:
            sub = value.empty()
            dest.set(part, sub)
        source, dest = value, sub
    value = source.get(parts[-1], None)
    if value is not None:
        dest.set(parts[-1], value)


def check_env_specs(env, return_contiguous: bool | None = None, check_dtype: bool = True, seed: int | None = None,
                    tensordict: TensorDictBase | None = None, break_when_any_done: bool | str | None = None) -> None:
    """Roll ``env`` out for three steps and check the data against its specs (TorchRL's check).

    Raises ``AssertionError`` when the keys, shapes or dtypes of the rollout differ from
    ``env.fake_tensordict()``, or when a value of the last step is outside its spec.
    ``break_when_any_done="both"`` checks with and without stopping at a done step; ``seed``
    seeds the env and torch, and torch's random state is restored afterwards.

    Examples:
        >>> from reap.envs import GymEnv
        >>> check_env_specs(GymEnv("CartPole-v1"), seed=0)
    """
    if break_when_any_done == "both":
        for mode in (True, False):
            check_env_specs(env, return_contiguous, check_dtype, seed, tensordict, mode)
        return
    if seed is not None:
        with torch.random.fork_rng(devices=[]):
            torch.manual_seed(seed)
            env.set_seed(seed)
            return check_env_specs(env, return_contiguous, check_dtype, None, tensordict, break_when_any_done)
    dynamic = env._has_dynamic_specs  # entries change shape: the data's sizes stand for the -1 dims
    return_contiguous = not dynamic if return_contiguous is None else return_contiguous
    fake = env.fake_tensordict()
    real = env.rollout(3, return_contiguous=return_contiguous, tensordict=tensordict, auto_reset=tensordict is None,
                       break_when_any_done=break_when_any_done)
    fake = fake.unsqueeze(real.batch_dims - 1).expand(*real.shape) if return_contiguous else \
        LazyStackedTensorDict.lazy_stack([fake.clone() for _ in range(real.shape[-1])], -1)
    state_next = {("next", *_tuple(k)) for k in env.state_spec.keys(True, True)}
    fake_keys = set(fake.keys(True, True)) - state_next
    real_keys = set(real.keys(True, True)) - state_next
    if fake_keys != real_keys:
        raise AssertionError(
            "The keys of the specs and data do not match:\n- List of keys present in real but not in fake: "
            f"keys_in_real_not_in_fake={real_keys - fake_keys!r},\n- List of keys present in fake but not in real: "
            f"keys_in_fake_not_in_real={fake_keys - real_keys!r}.\n")
    fake, real_checked = fake.exclude(*state_next), real.exclude(*state_next)
    if dynamic:  # step by step, fake's entries broadcast to the data's shapes (its -1 dims are 1s)
        for f, r in zip(fake.unbind(-1), real_checked.unbind(-1)):
            _check_level(_broadcast_to(f, r), r, check_dtype)
    else:
        _check_level(fake, real_checked, check_dtype)
    last = env.rand_action(real[..., -1])
    checks = [("action", env.full_action_spec, last), ("state", env.full_state_spec, last),
              ("done", env.full_done_spec, last), ("obs", env.full_observation_spec, last),
              ("reward", env.full_reward_spec, last.get("next")), ("done", env.full_done_spec, last.get("next")),
              ("obs", env.full_observation_spec, last.get("next"))]
    for name, spec, data in checks:
        data = data.select(*spec.keys(True, True), strict=True)
        if not spec.contains(data):
            raise AssertionError(f"spec check failed at root for spec {name}={spec} and data {data}.")


def _broadcast_to(fake: TensorDictBase, real: TensorDictBase) -> TensorDictBase:
    """``fake``'s leaves expanded to the shapes of ``real``'s (a lazy stack member by member)."""
    for lazy in (fake, real):
        if isinstance(lazy, LazyStackedTensorDict):
            return LazyStackedTensorDict.lazy_stack(
                [_broadcast_to(f, r) for f, r in zip(fake.unbind(lazy.stack_dim), real.unbind(lazy.stack_dim))],
                lazy.stack_dim)
    out = fake.empty()
    for key in fake.keys():
        f, r = fake.get(key), real.get(key, None)
        if r is None or not (isinstance(f, torch.Tensor) or is_tensor_collection(f)):  # a string: as it is
            out.set(key, f)
        elif is_tensor_collection(f):
            if f.batch_size != r.batch_size:  # a -1 dim of a Composite's own shape
                try:
                    f = f.expand(*r.batch_size)
                except RuntimeError:
                    raise AssertionError(f"The shapes of the real and fake tensordict don't match for key {key}. "
                                         f"Got fake={f.batch_size} and real={r.batch_size}.") from None
            out.set(key, _broadcast_to(f, r))
        else:
            try:
                out.set(key, f.expand_as(r))
            except RuntimeError:
                raise AssertionError(f"The shapes of the real and fake tensordict don't match for key {key}. "
                                     f"Got fake={f.shape} and real={r.shape}.") from None
    return out


def _tuple(key) -> tuple:
    return (key,) if isinstance(key, str) else tuple(key)


def _check_level(fake: TensorDictBase, real: TensorDictBase, check_dtype: bool) -> None:
    """The shapes and dtypes of ``real`` against ``fake``, level by level (a lazy stack per member)."""
    for lazy in (fake, real):
        if isinstance(lazy, LazyStackedTensorDict):
            for f, r in zip(fake.unbind(lazy.stack_dim), real.unbind(lazy.stack_dim)):
                _check_level(f, r, check_dtype)
            return
    if set(fake.keys()) != set(real.keys()):
        raise AssertionError(f"Keys mismatch: {set(fake.keys())} vs {set(real.keys())}")
    for key in fake.keys():
        f, r = fake.get(key), real.get(key)
        if not (isinstance(f, torch.Tensor) or is_tensor_collection(f)):  # a tensorclass's string field
            continue
        if f.shape != r.shape:
            raise AssertionError(f"The shapes of the real and fake tensordict don't match for key {key}. Got "
                                 f"fake={f.shape} and real={r.shape}.")
        if is_tensor_collection(f):
            _check_level(f, r, check_dtype)
        elif check_dtype and f.dtype != r.dtype:
            raise AssertionError(f"The dtypes of the real and fake tensordict don't match for key {key}. Got "
                                 f"fake={f.dtype} and real={r.dtype}.")


#: Names other packages register under TorchRL's ``torchrl.envs.utils`` path.
__getattr__ = module_getattr(__name__)
