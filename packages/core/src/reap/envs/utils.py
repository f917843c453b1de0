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

from tensordict import TensorDict, TensorDictBase
from tensordict.nn import InteractionType as ExplorationType
from tensordict.nn import set_interaction_type as set_exploration_type
from tensordict.nn.probabilistic import interaction_type as exploration_type

from reap.mirror import module_getattr
from reap.specs import Composite

__all__ = [
    "ExplorationType", "RandomPolicy", "check_env_specs", "exploration_type", "set_exploration_type",
    "step_mdp",
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
        """Take ``env.full_action_spec`` unless a spec was given (collectors call this)."""
        if self.action_spec is None:
            self.action_spec = env.full_action_spec.clone()

    def __call__(self, td: TensorDictBase) -> TensorDictBase:
        if self.action_spec is None:
            raise RuntimeError("RandomPolicy has no action_spec: pass RandomPolicy(env.action_spec), or "
                               "hand it to a collector, which gives it the env's")
        if isinstance(self.action_spec, Composite):
            return td.update(self.action_spec.rand())
        return td.set(self.action_key, self.action_spec.rand())


def _key_list(keys) -> list:
    return [keys] if isinstance(keys, (str, tuple)) else list(keys)


def step_mdp(tensordict: TensorDictBase, next_tensordict: TensorDictBase | None = None, *,
             keep_other: bool = True, exclude_reward: bool = True, exclude_done: bool = False,
             exclude_action: bool = True, reward_keys="reward", done_keys="done",
             action_keys="action") -> TensorDictBase:
    """The root of the next step: ``tensordict["next"]`` moved up (TorchRL's ``step_mdp``).

    Root entries that ``"next"`` does not hold are kept (``keep_other``), except the action
    (``exclude_action``); the reward is left out (``exclude_reward``), the done flags kept
    unless ``exclude_done``. With ``next_tensordict`` the result is written into it.
    """
    reward_keys, done_keys, action_keys = map(_key_list, (reward_keys, done_keys, action_keys))
    dropped = [*(reward_keys if exclude_reward else []), *(done_keys if exclude_done else [])]
    nxt = tensordict.get("next")
    if keep_other:
        out = tensordict.exclude("next", *dropped, *(action_keys if exclude_action else []))
    else:
        out = TensorDict(batch_size=tensordict.batch_size, device=tensordict.device)
    out.update(nxt.exclude(*dropped))
    if next_tensordict is not None:
        return next_tensordict.update(out)
    return out


def check_env_specs(env, return_contiguous: bool = True, check_dtype: bool = True,
                    seed: int | None = None, tensordict: TensorDictBase | None = None,
                    break_when_any_done: bool | str = False) -> None:
    """Roll ``env`` out for three steps and check the data against its specs (TorchRL's check).

    Raises ``AssertionError`` naming each entry whose presence, shape or dtype differs from
    ``env.fake_tensordict()``, or whose value is outside its spec.
    """
    if seed is not None:
        env.set_seed(seed)
    modes = [True, False] if break_when_any_done == "both" else [bool(break_when_any_done)]
    fake = env.fake_tensordict()
    for mode in modes:
        real = env.rollout(3, return_contiguous=return_contiguous, break_when_any_done=mode,
                           tensordict=tensordict, auto_reset=tensordict is None)
        real = real[..., 0]
        fake_keys = set(fake.keys(True, True))
        real_keys = set(real.keys(True, True))
        problems = []
        if fake_keys != real_keys:
            problems.append(
                f"keys differ: only in the specs {sorted(map(str, fake_keys - real_keys))}, only in "
                f"the rollout {sorted(map(str, real_keys - fake_keys))}"
            )
        for key in sorted(fake_keys & real_keys, key=str):
            f, r = fake.get(key), real.get(key)
            if f.shape != r.shape:
                problems.append(f"{key}: the specs say shape {tuple(f.shape)}, the rollout has {tuple(r.shape)}")
            if check_dtype and f.dtype != r.dtype:
                problems.append(f"{key}: the specs say dtype {f.dtype}, the rollout has {r.dtype}")
        problems.extend(_check_raw_outputs(env, check_dtype))
        action = real.get(env.action_key)
        if not env.action_spec.is_in(action):
            problems.append(f"{env.action_key!r}: the rollout's action is not in env.action_spec")
        if problems:
            raise AssertionError(
                f"check_env_specs: {type(env).__name__}'s specs do not match its data:\n  - "
                + "\n  - ".join(problems)
            )


#: Names other packages register under TorchRL's ``torchrl.envs.utils`` path.
__getattr__ = module_getattr(__name__)


def _check_raw_outputs(env, check_dtype: bool) -> list[str]:
    """What a TorchRL-style custom env's ``_reset``/``_step`` return, against its specs.

    The array API writes those outputs into arrays shaped by the specs, where broadcasting or
    casting could hide a mismatch.
    """
    from reap.envs.base import EnvBase

    if type(env)._step_into is not EnvBase._step_into:
        return []
    specs = {**env.observation_spec, "reward": env.reward_spec, "done": env.done_spec["done"]}
    problems = []
    td = env._reset(TensorDict(batch_size=env.batch_size))
    td = td.clone().set(env.action_key, env.action_spec.rand())
    for where, out, keys in (("_reset", td, list(env.observation_spec.keys())),
                             ("_step", env._step(td), list(specs))):
        for key in keys:
            if key not in out.keys():
                problems.append(f"{key}: {where} does not return it")
                continue
            value, spec = out.get(key), specs[key]
            if tuple(value.shape) != tuple(spec.shape):
                problems.append(f"{key}: the specs say shape {tuple(spec.shape)}, {where} returns "
                                f"{tuple(value.shape)}")
            if check_dtype and value.dtype != spec.dtype:
                problems.append(f"{key}: the specs say dtype {spec.dtype}, {where} returns {value.dtype}")
    return problems
