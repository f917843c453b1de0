import numpy as np
import pytest
import torch

from reap import (
    ClipTransform,
    Collector,
    Compose,
    DoubleToFloat,
    GymEnv,
    ObservationNorm,
    RewardSum,
    StepCounter,
    TransformedEnv,
    VecNorm,
)
from reap_testing import CountingEnv

ONES = lambda td: td.set("action", torch.ones(td.batch_size + (1,)))  # noqa: E731


def test_step_counter_truncates_and_counts_per_trajectory():
    env = TransformedEnv(CountingEnv(limit=100.0), StepCounter(max_steps=3))
    td = env.rollout(7, policy=ONES, break_when_any_done=False)
    assert td["step_count"].flatten().tolist() == [0, 1, 2, 0, 1, 2, 0]
    assert td["next", "step_count"].flatten().tolist() == [1, 2, 3, 1, 2, 3, 1]
    assert td["next", "truncated"].flatten().tolist() == [False, False, True] * 2 + [False]
    assert not td["next", "terminated"].any()


def test_reward_sum_is_the_running_episode_return():
    env = TransformedEnv(GymEnv("Pendulum-v1"), RewardSum())
    with Collector(env, None, frames_per_batch=250, total_frames=250) as c:
        (b,) = list(c)
    reward = b["next", "reward"].squeeze(-1)
    ep = b["next", "episode_reward"].squeeze(-1)
    torch.testing.assert_close(ep[:200], reward[:200].cumsum(0))
    torch.testing.assert_close(ep[200:], reward[200:].cumsum(0))
    assert b["episode_reward"][200].item() == 0.0


def test_double_to_float_changes_specs_and_values():
    env = TransformedEnv(CountingEnv(dtype=torch.float64), DoubleToFloat())
    assert env.observation_spec["observation"].dtype == torch.float32
    td = env.rollout(3, policy=ONES)
    assert td["next", "observation"].dtype == torch.float32
    assert td["next", "observation"].flatten().tolist() == [1.0, 2.0, 3.0]


def test_clip_transform():
    env = TransformedEnv(CountingEnv(limit=100.0), ClipTransform(low=0.0, high=2.5))
    td = env.rollout(4, policy=ONES)
    assert td["next", "observation"].flatten().tolist() == [1.0, 2.0, 2.5, 2.5]
    with pytest.raises(ValueError, match="low=3.0 must not exceed high=1.0"):
        ClipTransform(low=3.0, high=1.0)
    with pytest.raises(ValueError, match="give low, high or both"):
        ClipTransform()


def test_observation_norm_and_init_stats():
    env = TransformedEnv(CountingEnv(limit=100.0), ObservationNorm(loc=1.0, scale=2.0))
    td = env.rollout(3, policy=ONES)
    assert td["next", "observation"].flatten().tolist() == [0.0, 0.5, 1.0]
    assert td["observation"].flatten().tolist() == [-0.5, 0.0, 0.5]
    norm = ObservationNorm(in_keys=["observation"])
    env = TransformedEnv(GymEnv("Pendulum-v1"), norm)
    with pytest.raises(RuntimeError, match="call init_stats"):
        env.reset()
    norm.init_stats(500)
    base = GymEnv("Pendulum-v1")
    base.set_seed(0), env.set_seed(0)
    zero = lambda td: td.set("action", torch.zeros(1))  # noqa: E731
    raw = base.rollout(50, policy=zero)["next", "observation"]
    normed = env.rollout(50, policy=zero)["next", "observation"]
    torch.testing.assert_close(normed, (raw - norm.loc) / norm.scale)
    assert norm.scale.shape == (3,) and (norm.scale > 0).all()
    with pytest.raises(KeyError, match=r"in_keys \['pixels'\] are not produced"):
        TransformedEnv(GymEnv("Pendulum-v1"), ObservationNorm(0.0, 1.0, in_keys=["pixels"]))


def test_vec_norm_matches_decayed_running_statistics():
    decay = 0.9
    env = TransformedEnv(CountingEnv(limit=100.0), VecNorm(decay=decay, eps=1e-4))
    td = env.rollout(5, policy=ONES)
    raw = [0.0, 1.0, 2.0, 3.0, 4.0, 5.0]  # reset, then five steps
    s = ss = n = 0.0
    expected = []
    for x in raw:
        s, ss, n = s * decay + x, ss * decay + x * x, n * decay + 1
        mean = s / n
        std = max(np.sqrt(max(ss / n - mean * mean, 0.0)), 1e-4)
        expected.append((x - mean) / std)
    got = [td["observation"][0].item()] + td["next", "observation"].flatten().tolist()
    np.testing.assert_allclose(got, expected, rtol=1e-5, atol=1e-6)


def test_vec_norm_statistics_are_shared():
    first = VecNorm()
    env1 = TransformedEnv(CountingEnv(limit=100.0), first.share_memory())
    env2 = TransformedEnv(CountingEnv(limit=100.0), VecNorm(shared_data=first.get_extra_state()))
    env1.rollout(3, policy=ONES)
    env2.rollout(3, policy=ONES)
    count = first.get_extra_state()["observation"]["count"].item()
    assert count == pytest.approx(8 * 1.0, rel=1e-3)  # 2 resets + 6 steps, barely decayed
    assert first.get_extra_state()["observation"]["sum"].is_shared()


def test_compose_and_bad_arguments():
    env = TransformedEnv(GymEnv("CartPole-v1"), Compose(StepCounter(5), RewardSum()))
    assert [type(t).__name__ for t in env.transforms] == ["StepCounter", "RewardSum"]
    assert set(env.state_keys) == {"observation", "step_count", "episode_reward"}
    with pytest.raises(ValueError, match="max_steps must be a positive int"):
        StepCounter(0)
    with pytest.raises(ValueError, match="decay must be in"):
        VecNorm(decay=0.0)
    with pytest.raises(TypeError, match="expected a Transform"):
        env.append_transform(lambda x: x)
