"""The collectors' TensorDict path, for envs the array path cannot drive.

``Collector`` drives an env through preallocated arrays (:mod:`reap.collectors.collector`) when
its entries are TorchRL's plain layout: top-level observations, one top-level action, top-level
rewards and done flags. An env with several action keys (multi-agent groups such as
``("agents", "action")``), nested entries, heterogeneous (lazy-stacked) groups or non-tensor
entries (``NonTensor`` specs: strings, objects) is driven here
instead, as TorchRL's ``Collector`` drives every env: one TensorDict per step, the policy called
on it, ``env.step_and_maybe_reset``, the steps stacked into the batch. This is slower (tens of
microseconds of TensorDict work per step) and the collector says which path it took
(``collector.path``, its repr).

The batch has TorchRL's layout: the root entries, the policy's outputs, ``"next"`` and
``("collector", "traj_ids")`` (one id per env, a new one after any of the env's done flags, a
sub-group's included), shape ``(*env.batch_size, steps)``; the root of step t + 1 is the
``"next"`` of step t but where a done sub-group was reset.

Examples:
    >>> from reap import Collector
    >>> from reap_testing.envs import AgentsEnv
    >>> with Collector(AgentsEnv(), None, frames_per_batch=8, total_frames=8) as collector:
    ...     batch = next(iter(collector))
    >>> collector.path, batch.batch_size, batch["next", "agents", "reward"].shape
    ('tensordict', torch.Size([2, 4]), torch.Size([2, 4, 3, 1]))
"""

from __future__ import annotations

import torch
from tensordict import LazyStackedTensorDict, NonTensorData, TensorDictBase
from tensordict.utils import is_non_tensor

from reap.collectors.base import is_private_key
from reap.envs.base import EnvBase, _tensordict_policy, is_hidden
from reap.specs import Composite
from reap.specs.non_tensor import holds_non_tensor
from reap.specs.stacked import Stacked, StackedComposite

TRAJ_KEY = ("collector", "traj_ids")


def stepwise_reason(env: EnvBase) -> str | None:
    """Why ``env`` needs the TensorDict path (several or nested action keys, nested entries,
    heterogeneous groups, done flags not at the top), or None when the array path drives it.

    Examples:
        >>> from reap import GymEnv
        >>> from reap_testing.envs import AgentsEnv
        >>> stepwise_reason(GymEnv("CartPole-v1")) is None
        True
        >>> stepwise_reason(AgentsEnv())
        "nested action key ('agents', 'action')"
    """
    if env._skips_steps:
        return "a transform that skips steps (ConditionalSkip)"
    if env._resets_itself:
        return "an env that resets itself (AutoResetEnv)"
    actions = list(env.action_keys)
    if len(actions) != 1:
        return f"{len(actions)} action keys {actions}"
    if isinstance(actions[0], tuple):
        return f"nested action key {actions[0]}"
    specs = (env.full_observation_spec, env.full_action_spec, env.full_reward_spec, env.full_done_spec)
    for spec in specs:
        for key, sub in spec.items(True):
            if isinstance(sub, (Stacked, StackedComposite)):
                return f"heterogeneous (lazy-stacked) entry {key!r}"
            if holds_non_tensor(sub):
                return f"non-tensor entry {key!r}"
    done = [k for k in env.done_keys if isinstance(k, tuple)]
    if done or "done" not in env.done_keys:
        return f"done flags {list(env.done_keys)} not all at the top level"
    for spec in specs:
        nested = [k for k, sub in spec.items(True) if isinstance(k, tuple) or isinstance(sub, Composite)]
        if nested:
            return f"nested entry {nested[0]!r}"
    dynamic = _dynamic_keys(env)
    if dynamic:
        return f"variable-shape entry {dynamic[0]!r} (a -1 dim in its spec)"
    return None


def _dynamic_keys(env: EnvBase) -> list:
    """The entries whose spec has a dim of unknown size (-1): their shape changes from step to step."""
    specs = (env.full_observation_spec, env.full_action_spec, env.full_reward_spec, env.full_done_spec,
             env.full_state_spec)
    return [k for spec in specs for k, sub in spec.items(True, True) if any(s < 0 for s in sub.shape)]


def non_tensor_keys(td: TensorDictBase) -> list:
    """The keys of ``td``'s non-tensor entries (``NonTensorData``/``NonTensorStack``)."""
    return [key for key in td.keys(True) if is_non_tensor(td.get(key))]


def _end_of_traj(next_td: TensorDictBase, done_keys, batch_dims: int) -> torch.Tensor:
    """Per env (batch-shaped): whether any of its done flags, a sub-group's included, is set."""
    ended = None
    for key in done_keys:
        flag = next_td.get(key, None)
        if flag is None:
            continue
        if flag.ndim > batch_dims:
            flag = flag.flatten(batch_dims, flag.ndim - 1).any(-1)
        ended = flag if ended is None else ended | flag
    return ended


class StepwiseRollout:
    """One TensorDict per step (see the module docstring): the collector's path for envs whose
    layout the array path does not cover.

    ``rollout(random)`` runs ``steps`` steps and returns them, ``batch(steps, dest)`` stacks them
    into ``dest`` (laid out as ``empty_batch()``) or a fresh batch.
    """

    def __init__(self, env: EnvBase, policy, *, steps: int, traj_counter, generator=None,
                 policy_device=None, track_traj_ids: bool = True, compact_obs: bool = False):
        self.env = env
        self.steps = steps
        self.generator = generator
        self.policy_device = policy_device
        self.track_traj_ids = track_traj_ids
        self.compact_obs = compact_obs
        self._traj_counter = traj_counter
        if hasattr(policy, "set_action_spec_from_env"):  # RandomPolicy() takes the env's, as in TorchRL
            policy.set_action_spec_from_env(env)
        self.policy = None if policy is None else _tensordict_policy(policy, env)
        self.carrier: TensorDictBase | None = None
        self.reset()
        self.exclude_private_keys = True  # TorchRL's default (Collector._exclude_private_keys)
        #: entries change shape from step to step: batches are lazy stacks, no fixed layout
        self.dynamic = bool(_dynamic_keys(env))
        self._template = None if self.dynamic else self._make_template()
        self._non_tensor_keys = [] if self.dynamic else non_tensor_keys(self._template)

    # ---- carrier ---------------------------------------------------------------------------
    def _new_ids(self, count: int) -> torch.Tensor:
        first = self._traj_counter.take(count)
        return torch.arange(first, first + count, dtype=torch.int64)

    def reset(self, index=None) -> None:
        """Reset every env (or those at ``index``), with new trajectory ids."""
        env = self.env
        batch = env.batch_size
        if index is None or self.carrier is None:
            self.carrier = env.reset()
            if self.track_traj_ids:
                self.carrier.set(TRAJ_KEY, self._new_ids(env.numel).reshape(batch))
            return
        mask = torch.zeros(batch, dtype=torch.bool)
        mask[index] = True
        given = self.carrier.copy()
        for reset_key, done_key in zip(env.reset_keys, env.done_keys_groups):
            shape = given.get(done_key[0]).shape
            given.set(reset_key, mask.reshape(*batch, *[1] * (len(shape) - len(batch))).expand(shape))
        carrier = env.reset(given)
        for reset_key in env.reset_keys:
            carrier.pop(reset_key, None)
        if self.track_traj_ids:
            ids = self.carrier.get(TRAJ_KEY).clone()
            ids[mask] = self._new_ids(int(mask.sum()))
            carrier.set(TRAJ_KEY, ids)
        self.carrier = carrier

    def _act(self, td: TensorDictBase, random: bool) -> TensorDictBase:
        if random or self.policy is None:
            return td.update(self.env.full_action_spec.rand(generator=self.generator))
        given = td if self.policy_device is None else td.to(self.policy_device)
        out = self.policy(given)
        if out is None:
            out = given
        if self.policy_device is not None:
            out = out.to("cpu")
        if out is not td:
            td.update(out)
        return td

    def _make_template(self) -> TensorDictBase:
        """One step's layout (TorchRL's: the env's fake step, the root, the policy's outputs),
        zeroed, stacked ``steps`` times along the time dim."""
        env = self.env
        step = env.fake_tensordict()
        root = self.carrier.copy()
        step.update(root.exclude(*(k for k in root.keys() if is_hidden(k))))
        with torch.no_grad():
            probe = self._act(self.carrier.clone(), random=False)
        step.update(probe.exclude("next", *step.keys()))
        if probe.get("next", None) is not None:  # a policy's ("next", ...) outputs, e.g. a recurrent state
            step.get("next").update(probe.get("next").exclude(*step.get("next").keys(True, True)))
        step = self._left_out(step).clone().zero_()
        if self.track_traj_ids:
            step.set(TRAJ_KEY, torch.zeros(env.batch_size, dtype=torch.int64))
        return LazyStackedTensorDict.maybe_dense_stack([step.clone() for _ in range(self.steps)], env.batch_dims)

    def _left_out(self, td: TensorDictBase) -> TensorDictBase:
        """``td`` without what batches leave out: private entries and, with ``compact_obs``, the
        next observations and states."""
        dropped = [k for k in td.keys(True) if is_private_key(k)] if self.exclude_private_keys else []
        if self.compact_obs:
            dropped += self.env._compact_next_keys()
        return td.exclude(*dropped) if dropped else td

    def empty_batch(self) -> TensorDictBase:
        if self.dynamic:
            raise ValueError(f"the env has variable-shape entries {_dynamic_keys(self.env)}: its batches have no "
                             "fixed layout to preallocate (return_same_td=True, a preallocated batch); each batch "
                             "is a new lazy stack")
        return self._template.clone()

    # ---- rollout ---------------------------------------------------------------------------
    def rollout(self, random: bool = False, interruptor=None) -> list[TensorDictBase]:
        """``steps`` steps from the carrier (fewer once ``interruptor`` says stop); the carrier
        ends at the root of the next step."""
        env, nb = self.env, self.env.batch_dims
        done_keys = env.done_keys
        out = []
        td = self.carrier
        for _ in range(self.steps):
            td = self._act(td, random)
            # kept out of the step: a partial reset pads what it does not write in the reset envs
            collector = td.pop("collector") if self.track_traj_ids else None
            stepped, root = env.step_and_maybe_reset(td)
            for reset_key in env.reset_keys:
                root.pop(reset_key, None)
            out.append(stepped)
            if self.track_traj_ids:
                stepped.set("collector", collector)
                ids = stepped.get(TRAJ_KEY)
                root.set("collector", collector.copy())
                ended = _end_of_traj(stepped.get("next"), done_keys, nb)
                if ended is not None and ended.any():
                    root.set(TRAJ_KEY, ids.masked_scatter(ended, self._new_ids(int(ended.sum()))))
            td = root
            if interruptor is not None and interruptor.collection_stopped():
                break
        self.carrier = td
        return out

    def batch(self, steps: list[TensorDictBase], dest: TensorDictBase | None = None) -> TensorDictBase:
        """``steps`` stacked along the time dim into ``dest`` (default: a new batch); after an
        interrupted rollout the steps not collected get traj id -1."""
        data = LazyStackedTensorDict.maybe_dense_stack(steps, self.env.batch_dims)
        if self.dynamic and dest is None:  # TorchRL's: the steps' lazy stack
            return self._left_out(data)
        dest = self.empty_batch() if dest is None else dest
        target = dest
        if len(steps) < self.steps:
            if self.track_traj_ids:
                dest.get(TRAJ_KEY).fill_(-1)
            target = dest[..., : len(steps)]  # a view: writes reach dest
        target.update_(data.select(*dest.keys(True, True), strict=False))
        for key in self._non_tensor_keys:  # not written in place: replaced
            if target is dest:
                dest.set(key, data.get(key))
            else:  # an interrupted rollout: the steps not collected hold None
                dest.set(key, LazyStackedTensorDict.maybe_dense_stack(
                    [*data.get(key).unbind(-1), *[NonTensorData(None, batch_size=data.batch_size[:-1])] *
                     (self.steps - len(steps))], -1))
        return dest


__all__ = ["StepwiseRollout", "non_tensor_keys", "stepwise_reason"]
