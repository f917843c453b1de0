import pytest
import torch

from reap import (
    CatFrames,
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
from reap.specs import Unbounded
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
    env = TransformedEnv(CountingEnv(limit=100.0), ClipTransform(in_keys=["observation"], low=0.0, high=2.5))
    td = env.rollout(4, policy=ONES)
    assert td["next", "observation"].flatten().tolist() == [1.0, 2.0, 2.5, 2.5]
    assert ClipTransform(low=0.0).in_keys == []  # TorchRL's default: nothing clipped
    with pytest.raises(ValueError, match="`low` must be strictly lower than `high`"):
        ClipTransform(low=3.0, high=1.0)
    with pytest.raises(TypeError, match="Either one or both of `high` and `low` must be provided"):
        ClipTransform()


def test_observation_norm_and_init_stats():
    env = TransformedEnv(CountingEnv(limit=100.0), ObservationNorm(loc=1.0, scale=2.0, in_keys=["observation"]))
    td = env.rollout(3, policy=ONES)
    assert td["next", "observation"].flatten().tolist() == [3.0, 5.0, 7.0]  # TorchRL's default: obs * scale + loc
    assert td["observation"].flatten().tolist() == [1.0, 3.0, 5.0]
    env = TransformedEnv(CountingEnv(limit=100.0), ObservationNorm(1.0, 2.0, ["observation"], standard_normal=True))
    assert env.rollout(3, policy=ONES)["next", "observation"].flatten().tolist() == [0.0, 0.5, 1.0]
    with pytest.raises(RuntimeError, match="Not passing in_keys to ObservationNorm"):
        ObservationNorm(0.0, 1.0)
    norm = ObservationNorm(in_keys=["observation"])
    env = TransformedEnv(GymEnv("Pendulum-v1"), norm)
    with pytest.raises(RuntimeError, match="call the init_stats method"):
        env.reset()
    norm.init_stats(500)
    with pytest.raises(RuntimeError, match="already initialized"):
        norm.init_stats(10)
    base = GymEnv("Pendulum-v1")
    base.set_seed(0), env.set_seed(0)
    zero = lambda td: td.set("action", torch.zeros(1))  # noqa: E731
    raw = base.rollout(50, policy=zero)["next", "observation"]
    normed = env.rollout(50, policy=zero)["next", "observation"]
    torch.testing.assert_close(normed, raw * norm.scale + norm.loc)  # scale = 1 / std, loc = -mean / std
    assert norm.scale.shape == (3,) and (norm.scale > 0).all()
    assert sorted(norm.state_dict()) == ["loc", "scale", "standard_normal"]  # buffers, as TorchRL's


@pytest.mark.parametrize("transform", [
    lambda: ObservationNorm(0.0, 2.0, in_keys=["observation", "pixels"]),
    lambda: CatFrames(2, -1, in_keys=["observation", "pixels"]),
])
def test_in_keys_the_env_partly_lacks_build_the_env_and_fail_its_data(transform):
    # TorchRL builds the env and raises at its first step; reap warns when it is built, and its
    # resets and steps raise, rather than give data its specs do not describe
    message = r"in_keys \['pixels'\] are not produced by the env \(it has \['action', 'done', 'observation'"
    with pytest.warns(UserWarning, match=message):
        env = TransformedEnv(GymEnv("Pendulum-v1"), transform())
    assert "pixels" not in env.observation_spec.keys()  # the specs are transformed where they can be
    for call in (env.reset, lambda: env.rollout(2), lambda: env.rand_step(env.fake_tensordict())):
        with pytest.raises(KeyError, match=message):
            call()


# TorchRL 0.14.1's VecNorm(decay=0.9, eps=1e-4) (default in_keys: observation and reward) on
# Pendulum-v1 after env.set_seed(0), under the actions PENDULUM_ACTIONS (recorded once; CI has no
# TorchRL, tests/test_transforms_torchrl.py compares the two live, bit for bit).
# The tolerance is two float32 steps: the standard deviation is torch's float32 sqrt (as in
# TorchRL), which is not correctly rounded and differs between torch builds (torch 2.13's
# wheels disagree with IEEE's sqrt on ~1 input in 6); the values were recorded on a build whose
# sqrt gave the correctly rounded results.
RECORDED = {"rtol": 2.5e-7, "atol": 2.5e-7}
PENDULUM_ACTIONS = [torch.tensor([v]) for v in torch.linspace(-2, 2, 30).tolist()[:5]]
TORCHRL_PENDULUM = {
    ("next", "observation"): [
        [-0.7567226886749268, 0.9486809968948364, -0.9486826658248901],
        [-1.0994731187820435, 1.1870931386947632, -1.1107326745986938],
        [-0.9559378027915955, 1.3051732778549194, -1.1441267728805542],
        [-0.15689891576766968, 1.3623145818710327, -1.1050949096679688],
        [1.3686100244522095, 1.380091905593872, -1.0023107528686523],
    ],
    ("next", "reward"): [[0.0], [-0.9487990140914917], [-1.185163140296936], [-1.2177295684814453],
                         [-0.2470644861459732]],
}
TORCHRL_PENDULUM_STATS = {
    "observation_sum": [-4.607432842254639, 0.06900115311145782, -9.39706802368164],
    "observation_ssq": [4.531468391418457, 0.15412141382694244, 20.164255142211914],
    "observation_count": [4.685589790344238],  # the reset and 5 steps, decayed
    "reward_sum": [-38.688655853271484],
    "reward_ssq": [367.00360107421875],
    "reward_count": [4.095099925994873],  # 5 steps: the reward is not updated on reset
}


def seeded_like_torchrl(env):
    """``env.set_seed(0)``: the base env is reset with the seed, outside the transforms (TorchRL's)."""
    env.set_seed(0)
    return env


def test_vec_norm_gives_torchrl_values_on_pendulum():
    vecnorm = VecNorm(decay=0.9, eps=1e-4)
    env = seeded_like_torchrl(TransformedEnv(GymEnv("Pendulum-v1"), vecnorm))
    td = env.rollout(5, actions=PENDULUM_ACTIONS)
    assert vecnorm.in_keys == ["observation", "reward"]
    assert td["observation"][0].tolist() == [0.0, 0.0, 0.0]  # the first value normalises to 0
    for key, expected in TORCHRL_PENDULUM.items():
        assert td[key].dtype == torch.float32
        torch.testing.assert_close(td[key], torch.tensor(expected), **RECORDED)
    torch.testing.assert_close(td["observation"][1:], td["next", "observation"][:-1], rtol=0, atol=0)
    stats = vecnorm.get_extra_state()
    assert sorted(stats) == sorted(TORCHRL_PENDULUM_STATS)
    for name, expected in TORCHRL_PENDULUM_STATS.items():
        assert stats[name].dtype == torch.float32, name
        torch.testing.assert_close(stats[name], torch.tensor(expected), rtol=1e-6, atol=1e-6)
    assert isinstance(env.observation_spec["observation"], Unbounded)  # was Bounded


def test_vec_norm_eps_bounds_the_variance_and_resets_update_the_statistics():
    # TorchRL's VecNorm(in_keys=["observation"], decay=0.99, eps=1e-2) on CartPole-v1 after
    # set_seed(0), always pushing right: the pole falls at step 9 and the env is reset
    vecnorm = VecNorm(in_keys=["observation"], decay=0.99, eps=1e-2)
    env = seeded_like_torchrl(TransformedEnv(GymEnv("CartPole-v1", categorical_action_encoding=True), vecnorm))
    td = env.rollout(12, actions=[torch.tensor(1)] * 12, break_when_any_done=False)
    assert td["next", "done"].squeeze(-1).nonzero().flatten().tolist() == [9]
    expected_next = [[0.9606168270111084, 1.5400582551956177, -1.3827223777770996, -1.5840814113616943],
                     [1.1945300102233887, 1.551453709602356, -1.7427119016647339, -1.6065632104873657],
                     [-0.7582795023918152, -0.9958764910697937, 0.9076167345046997, 0.9448633193969727]]
    after_reset = [-0.8343961238861084, -1.3859145641326904, 0.9982539415359497, 1.3057276010513306]
    torch.testing.assert_close(td["next", "observation"][8:11], torch.tensor(expected_next), **RECORDED)
    torch.testing.assert_close(td["observation"][10], torch.tensor(after_reset), **RECORDED)
    count = vecnorm.get_extra_state()["observation_count"]
    torch.testing.assert_close(count, torch.tensor([13.125418663024902]))  # 2 resets + 12 steps


def test_vec_norm_partial_reset_counts_only_the_envs_reset():
    # TorchRL folds every env of the reset tensordict into the statistics on a partial reset,
    # counting the envs that were not reset a second time; reap counts the envs that are reset
    actions = [torch.tensor([1, i % 2]) for i in range(12)]  # env 0 falls, env 1 does not
    vecnorm = VecNorm(in_keys=["observation"], decay=1.0)
    env = TransformedEnv(GymEnv("CartPole-v1", num_envs=2, categorical_action_encoding=True), vecnorm)
    env.set_seed(0)
    td = env.rollout(12, actions=actions, break_when_any_done=False)
    raw_env = GymEnv("CartPole-v1", num_envs=2, categorical_action_encoding=True)
    raw_env.set_seed(0)
    raw = raw_env.rollout(12, actions=actions, break_when_any_done=False)
    (done,) = raw["next", "done"].squeeze(-1).nonzero().tolist()
    assert done[0] == 0 and done[1] < 11, done  # env 0 alone was reset, once
    t = done[1]
    stats = vecnorm.get_extra_state()
    assert stats["observation_count"].item() == 2 + 12 * 2 + 1
    expected_sum = raw["observation"][:, 0].sum(0) + raw["next", "observation"].sum((0, 1)) + raw["observation"][0, t + 1]
    torch.testing.assert_close(stats["observation_sum"], expected_sum)
    torch.testing.assert_close(td["observation"][1, t + 1], td["next", "observation"][1, t], rtol=0, atol=0)


def test_vec_norm_loc_scale_denorm_and_to_observation_norm():
    vecnorm = VecNorm(in_keys=["observation"], decay=0.9, eps=1e-4)
    env = seeded_like_torchrl(TransformedEnv(GymEnv("Pendulum-v1"), vecnorm))
    td = env.rollout(5, actions=PENDULUM_ACTIONS)
    loc = torch.tensor([-0.9833196997642517, 0.0147262467071414, -2.0055251121520996])  # TorchRL's
    scale = torch.tensor([0.013773946091532707, 0.18076442182064056, 0.5304060578346252])
    torch.testing.assert_close(vecnorm.loc["observation"], loc)
    torch.testing.assert_close(vecnorm.scale["observation"], scale)
    assert vecnorm.standard_normal
    norm = vecnorm.to_observation_norm()
    assert isinstance(norm, ObservationNorm) and norm.in_keys == ["observation"]
    torch.testing.assert_close(norm.loc, loc)
    torch.testing.assert_close(norm.scale, scale)
    raw = seeded_like_torchrl(TransformedEnv(GymEnv("Pendulum-v1"))).rollout(5, actions=PENDULUM_ACTIONS)
    last = td["next"][-1:]  # normalised with the statistics as they are now
    torch.testing.assert_close(vecnorm.denorm(last)["observation"], raw["next", "observation"][-1:])
    two = VecNorm(decay=0.9)
    TransformedEnv(GymEnv("Pendulum-v1"), two).rollout(2)
    fixed = two.to_observation_norm()
    assert [t.in_keys for t in fixed] == [["observation"], ["reward"]]
    td = seeded_like_torchrl(TransformedEnv(GymEnv("Pendulum-v1"), fixed)).rollout(5, actions=PENDULUM_ACTIONS)
    expected = (raw["next", "reward"] - two.loc["reward"]) / two.scale["reward"]
    torch.testing.assert_close(td["next", "reward"], expected)


def test_vec_norm_freeze_and_frozen_copy():
    vecnorm = VecNorm(in_keys=["observation"], decay=0.9)
    env = TransformedEnv(GymEnv("Pendulum-v1"), vecnorm)
    with pytest.raises(RuntimeError, match="Make sure the VecNorm has been initialized"):
        VecNorm().frozen_copy()
    env.rollout(3)
    frozen = vecnorm.frozen_copy()
    assert frozen.frozen and not vecnorm.frozen
    before = {k: v.clone() for k, v in vecnorm.get_extra_state().items()}
    eval_env = TransformedEnv(GymEnv("Pendulum-v1"), frozen)
    eval_env.set_seed(1)
    td = eval_env.rollout(4, actions=PENDULUM_ACTIONS[:4])
    torch.testing.assert_close(vecnorm.get_extra_state(), before)  # the copy left the source alone
    torch.testing.assert_close(frozen.get_extra_state(), before)  # nor the statistics it reads
    raw = TransformedEnv(GymEnv("Pendulum-v1"))
    raw.set_seed(1)
    expected = (raw.rollout(4, actions=PENDULUM_ACTIONS[:4])["next", "observation"] - vecnorm.loc["observation"]) / vecnorm.scale["observation"]
    torch.testing.assert_close(td["next", "observation"], expected)
    vecnorm.freeze()
    env.rollout(3)
    torch.testing.assert_close(vecnorm.get_extra_state(), before)
    vecnorm.unfreeze()
    env.rollout(1)
    count = vecnorm.get_extra_state()["observation_count"]
    assert count.item() > before["observation_count"].item()
    assert frozen.get_extra_state()["observation_count"] is count  # the copy reads the source's, as TorchRL's


def test_vec_norm_state_dict_roundtrip_keeps_shared_statistics():
    vecnorm = VecNorm(in_keys=["observation"])
    TransformedEnv(GymEnv("Pendulum-v1"), vecnorm).rollout(3)
    state = vecnorm.state_dict()
    assert list(state) == ["_extra_state"]  # as TorchRL's nn.Module state_dict
    assert sorted(state["_extra_state"]) == ["observation_count", "observation_ssq", "observation_sum"]
    other = VecNorm(in_keys=["observation"]).share_memory()
    TransformedEnv(GymEnv("Pendulum-v1"), other)
    other.load_state_dict(state)
    torch.testing.assert_close(other.get_extra_state(), vecnorm.get_extra_state())
    assert other.get_extra_state()["observation_sum"].is_shared()
    with pytest.raises(RuntimeError, match='Unexpected key\\(s\\) in state_dict: "observation.sum"'):
        other.load_state_dict({"observation.sum": torch.zeros(3)})


@pytest.mark.parametrize("new_api", [False, True])
def test_vec_norm_state_dict_of_an_uninitialised_one_warns(new_api):
    # TorchRL warns at state_dict() before any data and at loading statistics that are not shared
    empty = VecNorm(in_keys=["observation"], new_api=new_api)
    with pytest.warns(UserWarning, match="Querying state_dict on an uninitialized VecNorm"):
        state = empty.state_dict()
    filled = VecNorm(in_keys=["observation"], new_api=new_api)
    TransformedEnv(GymEnv("Pendulum-v1"), filled).rollout(2)
    fresh = VecNorm(in_keys=["observation"], new_api=new_api)
    with pytest.warns(UserWarning, match="VecNorm wasn't initialized and the tensordict is not shared"):
        fresh.load_state_dict(filled.state_dict())
    error = (RuntimeError, "called with a void state-dict") if new_api else (KeyError, "Could not find a tensordict")
    with pytest.raises(error[0], match=error[1]):
        fresh.load_state_dict(state)


def test_vec_norm_statistics_are_shared():
    first = VecNorm(decay=1.0)
    env1 = TransformedEnv(CountingEnv(limit=100.0), first.share_memory())
    env2 = TransformedEnv(CountingEnv(limit=100.0), VecNorm(shared_td=first.get_extra_state(), decay=1.0))
    env1.rollout(3, policy=ONES)
    env2.rollout(3, policy=ONES)
    stats = first.get_extra_state()
    assert stats["observation_count"].item() == 8.0  # 2 resets + 6 steps
    assert stats["reward_count"].item() == 6.0
    assert stats["observation_sum"].is_shared()
    with pytest.raises(RuntimeError, match="shared_td must be either in shared memory or a memmap"):
        VecNorm(shared_td={k: v.clone() for k, v in stats.items()})
    only_obs = VecNorm(in_keys=["observation"], shared_td=stats, decay=1.0)
    with pytest.raises(KeyError, match="key reward not present in the shared tensordict"):
        VecNorm(shared_td={k: v for k, v in stats.items() if "obs" in k})
    TransformedEnv(CountingEnv(limit=100.0), only_obs).rollout(1, policy=ONES)
    assert stats["observation_count"].item() == 10.0 and stats["reward_count"].item() == 6.0


@pytest.mark.slow
def test_vec_norm_statistics_are_shared_with_another_process():
    import torch.multiprocessing as mp

    vecnorm = VecNorm(decay=1.0).share_memory()
    env = TransformedEnv(CountingEnv(limit=100.0), vecnorm)
    child = mp.get_context("spawn").Process(target=env.rollout, args=(3,), kwargs={"actions": [torch.ones(1)] * 3})
    child.start()
    child.join(120)
    assert child.exitcode == 0
    stats = vecnorm.get_extra_state()
    assert stats["observation_count"].item() == 4.0  # the child's reset and 3 steps, seen here
    assert stats["observation_sum"].item() == 0.0 + 1.0 + 2.0 + 3.0


def test_vec_norm_holds_the_lock_while_updating():
    class RecordingLock:  # a multiprocessing lock in real use; this one says when it is held
        held = 0

        def __enter__(self):
            self.held += 1

        def __exit__(self, *exc):
            return False

    lock = RecordingLock()
    TransformedEnv(CountingEnv(limit=100.0), VecNorm(lock=lock)).rollout(3, policy=ONES)
    assert lock.held == 4  # the reset and 3 steps


def test_vec_norm_bad_arguments():
    assert type(VecNorm(in_keys=["observation"], new_api=True)).__name__ == "VecNormV2"  # as TorchRL's
    assert type(VecNorm(new_api=False)) is VecNorm
    with pytest.raises(ValueError, match="decay must be in"):
        VecNorm(decay=0.0)
    with pytest.raises(ValueError, match="eps must be > 0"):
        VecNorm(eps=0.0)
    with pytest.raises(TypeError, match="in_key 'step_count' has dtype torch.int64"):
        TransformedEnv(GymEnv("Pendulum-v1"), Compose(StepCounter(), VecNorm(in_keys=["step_count"])))
    with pytest.warns(UserWarning, match="Querying state_dict on an uninitialized VecNorm"):
        assert VecNorm().get_extra_state() is None and VecNorm().state_dict() == {"_extra_state": None}


def test_compose_and_bad_arguments():
    env = TransformedEnv(GymEnv("CartPole-v1"), Compose(StepCounter(5), RewardSum()))
    assert [type(t).__name__ for t in env.transform] == ["StepCounter", "RewardSum"]
    assert set(env.state_keys) == {"observation", "step_count", "episode_reward"}
    with pytest.raises(ValueError, match="max_steps should have a value greater or equal to one"):
        StepCounter(0)
    with pytest.raises(ValueError, match="expected a transform or a callable, but received an object of type"):
        env.append_transform(3)
