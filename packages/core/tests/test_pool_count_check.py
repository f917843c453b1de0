"""``TimeMaxPool``, ``TrajCounter`` and ``FiniteTensorDictCheck``: values against a plain
reference over the env's own observations, through resets of the whole env and of some sub-envs."""

import pickle

import pytest
import torch
from tensordict import TensorDict

from reap.collectors import Collector
from reap.envs import GymEnv, SerialEnv
from reap.envs.transforms import (
    Compose,
    FiniteTensorDictCheck,
    StepCounter,
    TimeMaxPool,
    TrajCounter,
    TransformedEnv,
)
from reap.envs.utils import check_env_specs
from reap_testing import CountingEnv


def reference_pool(observations, starts, window: int):
    """The max over the last ``window`` values since the last start, zeros filling the window."""
    out, values = [], []
    for obs, start in zip(observations, starts, strict=True):
        values = [obs] if start else [obs, *values][:window]
        padded = values + [torch.zeros_like(obs)] * (window - len(values))
        out.append(torch.stack(padded).max(0).values)
    return torch.stack(out)


def pooled_env(window=3):
    return TransformedEnv(GymEnv("Pendulum-v1"), Compose(StepCounter(5), TimeMaxPool(
        in_keys=["observation"], out_keys=["pooled"], T=window)))


def check_pooling(rollout, window):
    """Root and next pooled values against the reference over one env's [T] rollout."""
    done = rollout["next", "done"].squeeze(-1)
    starts = torch.cat([torch.ones(1, dtype=torch.bool), done[:-1]])
    # the observations in order: each root one at a start, then each step's next one
    sequence, flags, where = [], [], []
    for t in range(len(done)):
        if starts[t]:
            sequence.append(rollout["observation"][t]), flags.append(True), where.append(("root", t))
        sequence.append(rollout["next", "observation"][t]), flags.append(False), where.append(("next", t))
    expected = reference_pool(sequence, flags, window)
    for (side, t), value in zip(where, expected, strict=True):
        got = rollout["pooled"][t] if side == "root" else rollout["next", "pooled"][t]
        assert torch.equal(got, value), (side, t)


@pytest.mark.parametrize("window", [1, 3])
def test_time_max_pool_equals_the_reference_through_resets(window):
    env = pooled_env(window)
    check_env_specs(env)
    rollout = env.rollout(17, break_when_any_done=False)
    assert rollout["next", "done"].sum() == 3
    check_pooling(rollout, window)
    assert env.transform[-1].state_dict()["_maxpool_buffer_observation"].shape == (window, 3)


def test_time_max_pool_in_a_collector_over_sub_envs_that_reset_apart():
    def make():
        return TransformedEnv(SerialEnv(2, lambda: GymEnv("CartPole-v1")), TimeMaxPool(
            in_keys=["observation"], out_keys=["pooled"], T=4))
    with Collector(make, None, frames_per_batch=120, total_frames=120) as collector:
        batch = next(iter(collector))
    done = batch["next", "done"].squeeze(-1)
    assert done.any(-1).all() and not torch.equal(done[0], done[1])
    for row in batch.unbind(0):
        # a batch starts mid-trajectory only at a reset here (the collector resets at its start)
        check_pooling(row, 4)


class PoolThroughHooks(TimeMaxPool):
    """Overrides a TorchRL hook, so the env runs its TensorDict hooks instead of the array ones."""

    def _call(self, next_tensordict):
        return super()._call(next_tensordict)


def test_time_max_pool_hooks_and_arrays_agree():
    def rollout(cls):
        env = TransformedEnv(SerialEnv(2, lambda: GymEnv("CartPole-v1")), cls(in_keys=["observation"],
                                                                             out_keys=["pooled"], T=3))
        env.set_seed(0)
        torch.manual_seed(0)
        return env.rollout(40, break_when_any_done=False)
    arrays, hooks = rollout(TimeMaxPool), rollout(PoolThroughHooks)
    assert arrays["next", "done"].any()
    assert torch.equal(arrays["next", "pooled"], hooks["next", "pooled"])


def test_time_max_pool_errors():
    with pytest.raises(ValueError, match=r"TimeMaxPool: T \(the window's length\) must be an int >= 1, got 0"):
        TimeMaxPool(T=0)
    with pytest.raises(ValueError, match="in_keys .* and out_keys .* must be as many"):
        TimeMaxPool(in_keys=["a", "b"], out_keys=["c"])
    with pytest.raises(NotImplementedError, match="TimeMaxPool cannot be called independently"):
        TimeMaxPool()(TensorDict(observation=torch.zeros(2)))


def counted(n_envs=None, max_steps=3):
    base = GymEnv("Pendulum-v1") if n_envs is None else SerialEnv(n_envs, lambda: GymEnv("CartPole-v1"))
    return TransformedEnv(base, Compose(StepCounter(max_steps), TrajCounter()))


def test_traj_counter_numbers_each_trajectory():
    env = counted()
    spec = env.observation_spec["traj_count"]
    assert spec.dtype == torch.int64 and spec.shape == (1,) and spec.space.low == 0
    rollout = env.rollout(9, break_when_any_done=False)
    assert rollout["next", "traj_count"].flatten().tolist() == [0, 0, 0, 1, 1, 1, 2, 2, 2]
    assert torch.equal(rollout["traj_count"], rollout["next", "traj_count"])
    assert env.transform[-1].state_dict() == {"traj_count": 3}


def test_traj_counter_over_sub_envs_gives_every_trajectory_its_own_number():
    env = counted(3, max_steps=40)
    rollout = env.rollout(120, break_when_any_done=False)
    counts, done = rollout["next", "traj_count"].squeeze(-1), rollout["next", "done"].squeeze(-1)
    assert counts[:, 0].tolist() == [0, 1, 2]
    numbers = set()
    for row, flags in zip(counts, done, strict=True):
        starts = torch.cat([torch.ones(1, dtype=torch.bool), flags[:-1]])
        segments = torch.cumsum(starts.long(), 0)
        for segment in segments.unique():  # one number per trajectory, new at each start
            values = row[segments == segment].unique()
            assert values.numel() == 1 and values.item() not in numbers
            numbers.add(values.item())
    assert sorted(numbers) == list(range(len(numbers))) and len(numbers) == 3 + int(done[:, :-1].sum())


def test_traj_counter_state_clones_and_pickles():
    t = TrajCounter()
    t.load_state_dict({"traj_count": 7})
    env = TransformedEnv(GymEnv("Pendulum-v1"), Compose(StepCounter(2), t.clone()))
    assert env.rollout(4, break_when_any_done=False)["next", "traj_count"].flatten().tolist() == [7, 7, 8, 8]
    assert t.state_dict() == {"traj_count": 9}  # the clone shares the counter
    copy = pickle.loads(pickle.dumps(t))  # stored, not handed to a starting process: the count only
    copy.load_state_dict({"traj_count": 0})
    assert t.state_dict() == {"traj_count": 9}
    with pytest.raises(RuntimeError, match="TrajCounter can only be called within an environment step or reset."):
        t(TensorDict())
    with pytest.raises(KeyError, match=r"TrajCounter: no done flag in the group of its key \('agents', "
                                       r"'traj_count'\)"):
        TransformedEnv(GymEnv("Pendulum-v1"), TrajCounter(("agents", "traj_count")))


def test_finite_check_raises_at_the_step_that_writes_a_nan():
    env = TransformedEnv(CountingEnv(limit=100.0), FiniteTensorDictCheck())
    steps = iter([1.0, 1.0, float("nan")])

    def policy(td):
        return td.set("action", torch.full((1,), next(steps)))
    with pytest.raises(ValueError, match="Encountered a non-finite tensor."):
        env.rollout(3, policy)
    assert env.rollout(2, lambda td: td.set("action", torch.ones(1)))["next", "observation"].flatten().tolist() == [1, 2]
    check = FiniteTensorDictCheck()
    assert check(TensorDict(a=torch.arange(3), b=torch.zeros(2))) is not None
    with pytest.raises(ValueError, match="Encountered a non-finite tensor."):
        check(TensorDict(nested=TensorDict(b=torch.tensor([float("-inf")]))))


def test_finite_check_of_a_reset_and_in_a_collector():
    env = TransformedEnv(CountingEnv(dtype=torch.float64), FiniteTensorDictCheck())
    with Collector(env, None, frames_per_batch=20, total_frames=20) as collector:
        assert next(iter(collector))["next", "observation"].isfinite().all()
    nan_reset = TransformedEnv(CountingEnv(), FiniteTensorDictCheck())
    nan_reset.base_env._reset = lambda td: TensorDict(observation=torch.full((1,), float("nan")))
    with pytest.raises(ValueError, match="Encountered a non-finite tensor."):
        nan_reset.reset()
