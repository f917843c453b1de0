import warnings

import gymnasium as gym
import numpy as np
import pytest
import torch
from tensordict import TensorDict
from tensordict.nn import (
    InteractionType,
    ProbabilisticTensorDictModule,
    ProbabilisticTensorDictSequential,
    TensorDictModule,
    TensorDictSequential,
)
from torch.distributions import Normal

from reap import Collector, GymEnv, RewardSum, StepCounter, TransformedEnv, split_trajectories
from reap.data import Binary, Composite, Unbounded
from reap.envs import EnvBase
from reap_testing import CountingEnv

ROOT_KEYS = {"observation", "action", "done", "terminated", "truncated"}
NEXT_KEYS = {"observation", "reward", "done", "terminated", "truncated"}


def linear_policy(obs_dim=3, act_dim=1, seed=0):
    torch.manual_seed(seed)
    return TensorDictModule(torch.nn.Linear(obs_dim, act_dim), in_keys=["observation"], out_keys=["action"])


class ArgmaxLinear(torch.nn.Module):
    def __init__(self):
        super().__init__()
        torch.manual_seed(0)
        self.linear = torch.nn.Linear(4, 2)

    def forward(self, observation):
        return self.linear(observation).argmax(-1)


def test_batch_contract_single_env():
    with Collector(GymEnv("Pendulum-v1"), linear_policy(), frames_per_batch=50, total_frames=100) as c:
        batches = list(c)
    assert len(batches) == 2
    b = batches[0]
    assert b.batch_size == (50,)
    assert set(b.keys()) == ROOT_KEYS | {"next", "collector"}
    assert set(b["next"].keys()) == NEXT_KEYS
    for key in ("done", "terminated", "truncated"):
        assert b[key].shape == (50, 1) and b[key].dtype == torch.bool
        assert b["next", key].shape == (50, 1)
    assert b["next", "reward"].shape == (50, 1)
    assert b["collector", "traj_ids"].shape == (50,)
    # root of t+1 is next of t (no resets within 50 Pendulum steps)
    torch.testing.assert_close(b["observation"][1:], b["next", "observation"][:-1], rtol=0, atol=0)
    # and batches chain: first root of batch 2 is last next of batch 1
    torch.testing.assert_close(batches[1]["observation"][0], b["next", "observation"][-1], rtol=0, atol=0)


def test_batch_contract_batched_env_and_policy_output():
    env = GymEnv("Pendulum-v1", num_envs=4)
    with Collector(env, linear_policy(), frames_per_batch=40, total_frames=40) as c:
        (b,) = list(c)
    assert b.batch_size == (4, 10)
    assert b["observation"].shape == (4, 10, 3)
    assert b["collector", "traj_ids"][:, 0].tolist() == [0, 1, 2, 3]
    # the action stored is what the policy computes from the stored observation
    policy = linear_policy()
    with torch.no_grad():
        torch.testing.assert_close(b["action"], policy.module(b["observation"]))


def test_transitions_match_a_raw_gymnasium_replay():
    """The same seed and actions, replayed in plain gymnasium, give the same transitions."""
    env = GymEnv("CartPole-v1", categorical_action_encoding=True)
    with Collector(env, ArgmaxLinear(), frames_per_batch=300, total_frames=300) as c:
        c.set_seed(7)
        (b,) = list(c)
    ref = gym.make("CartPole-v1")
    ref.reset(seed=7)  # set_seed resets with the seed (TorchRL's); the collector's reset follows
    obs, _ = ref.reset()
    for t in range(300):
        np.testing.assert_array_equal(b["observation"][t].numpy(), obs)
        nobs, reward, term, trunc, _ = ref.step(int(b["action"][t]))
        np.testing.assert_array_equal(b["next", "observation"][t].numpy(), nobs)
        assert b["next", "reward"][t].item() == reward
        assert b["next", "terminated"][t].item() == term
        assert b["next", "truncated"][t].item() == trunc
        obs = ref.reset()[0] if term or trunc else nobs
    assert b["next", "done"].sum() > 3  # several episodes crossed


def test_traj_ids_change_exactly_after_done():
    with Collector(GymEnv("CartPole-v1", num_envs=3), None, frames_per_batch=300, total_frames=600) as c:
        batches = list(c)
    ids = torch.cat([b["collector", "traj_ids"] for b in batches], dim=1)
    done = torch.cat([b["next", "done"] for b in batches], dim=1).squeeze(-1)
    changed = ids[:, 1:] != ids[:, :-1]
    assert torch.equal(changed, done[:, :-1])
    # ids are unique across envs: no id appears in two rows
    rows = [set(row.tolist()) for row in ids]
    assert not (rows[0] & rows[1]) and not (rows[1] & rows[2])


def test_max_frames_per_traj_truncates_and_resets():
    env = GymEnv("Pendulum-v1", num_envs=2)
    with Collector(env, None, frames_per_batch=20, total_frames=20, max_frames_per_traj=4) as c:
        (b,) = list(c)
    trunc = b["next", "truncated"].squeeze(-1)
    assert trunc[:, 3::4].all() and trunc.sum() == 4  # steps 3 and 7 of each env
    assert torch.equal(b["next", "done"], b["next", "truncated"])
    assert not b["next", "terminated"].any()
    ids = b["collector", "traj_ids"][0]
    assert ids.tolist() == [0] * 4 + [2] * 4 + [4, 4]


def test_frames_yielded_are_total_rounded_up_to_a_batch():
    with Collector(GymEnv("CartPole-v1"), None, frames_per_batch=30, total_frames=100) as c:
        sizes = [b.numel() for b in c]
    assert sizes == [30, 30, 30, 30]


def test_frames_per_batch_rounded_to_env_multiple_warns():
    with pytest.warns(UserWarning, match="frames_per_batch=10 is not a multiple of the env's 4 envs"):
        c = Collector(GymEnv("CartPole-v1", num_envs=4), None, frames_per_batch=10, total_frames=12)
    assert c.frames_per_batch == 12
    assert next(iter(c)).shape == (4, 3)
    c.shutdown()


def test_init_random_frames_rounded_up_with_warning_and_used():
    class Constant(torch.nn.Module):
        def forward(self, observation):
            return torch.full((1,), 1.5)

    with pytest.warns(UserWarning, match=r"init_random_frames=15 is not a multiple.*first 20 frames"):
        c = Collector(GymEnv("Pendulum-v1"), Constant(), frames_per_batch=10, total_frames=30,
                      init_random_frames=15)
    batches = list(c)
    c.shutdown()
    assert c.init_random_frames == 20
    for b in batches[:2]:
        assert not (b["action"] == 1.5).all()
    assert (batches[2]["action"] == 1.5).all()


def test_total_frames_forever():
    c = Collector(GymEnv("CartPole-v1"), None, frames_per_batch=5, total_frames=-1)
    it = iter(c)
    for _ in range(7):
        next(it)
    assert c.frames == 35
    c.shutdown()


def test_reset_at_each_iter_starts_new_trajectories():
    env = CountingEnv(limit=100.0)
    policy = lambda observation: torch.ones(1)  # noqa: E731
    with Collector(env, policy, frames_per_batch=3, total_frames=6, reset_at_each_iter=True) as c:
        b1, b2 = list(c)
    assert b1["observation"].flatten().tolist() == [0, 1, 2]
    assert b2["observation"].flatten().tolist() == [0, 1, 2]
    assert b2["collector", "traj_ids"][0] != b1["collector", "traj_ids"][0]
    with Collector(env, policy, frames_per_batch=3, total_frames=6) as c:
        b1, b2 = list(c)
    assert b2["observation"].flatten().tolist() == [3, 4, 5]


def test_postproc_split_trajs_and_transforms():
    env = TransformedEnv(CountingEnv(limit=3.0), StepCounter())
    env.append_transform(RewardSum())
    policy = lambda observation: torch.ones(1)  # noqa: E731
    with Collector(env, policy, frames_per_batch=7, total_frames=7, split_trajs=True,
                   postproc=lambda td: td.set("seen", torch.ones(td.shape))) as c:
        (b,) = list(c)
    assert b.shape == (3, 3)
    assert b["collector", "mask"].tolist() == [[True] * 3, [True] * 3, [True, False, False]]
    assert b["next", "episode_reward"][0].flatten().tolist() == [1.0, 2.0, 3.0]
    assert b["step_count"][1].flatten().tolist() == [0, 1, 2]
    assert b["seen"].all()


def test_split_trajectories_matches_manual_grouping():
    ids = torch.tensor([[0, 0, 2, 2, 2], [1, 3, 3, 4, 4]])
    td = TensorDict({("collector", "traj_ids"): ids, "x": torch.arange(10).reshape(2, 5)}, [2, 5])
    out = split_trajectories(td)
    assert out["x"].tolist() == [[0, 1, 0], [2, 3, 4], [5, 0, 0], [6, 7, 0], [8, 9, 0]]  # rows first, as TorchRL
    assert out["collector", "mask"].sum().item() == 10


def test_replay_buffer_is_extended_and_iteration_yields_none():
    class ListBuffer:
        def __init__(self):
            self.items = []

        def extend(self, data):
            self.items.append(data)

    rb = ListBuffer()
    with Collector(GymEnv("CartPole-v1"), None, frames_per_batch=10, total_frames=30, replay_buffer=rb) as c:
        out = list(c)
    assert out == [None, None, None]
    assert [b.shape for b in rb.items] == [(10,)] * 3


def test_policy_forms_write_their_outputs():
    env = GymEnv("Pendulum-v1", num_envs=2)
    module = TensorDictModule(torch.nn.Linear(3, 2), in_keys=["observation"], out_keys=["loc_scale"])
    split = TensorDictModule(lambda x: (x[..., :1], x[..., 1:].exp()), in_keys=["loc_scale"],
                             out_keys=["loc", "scale"])
    actor = ProbabilisticTensorDictSequential(
        module, split,
        ProbabilisticTensorDictModule(in_keys=["loc", "scale"], out_keys=["action"],
                                      distribution_class=Normal, return_log_prob=True),
    )
    with Collector(env, actor, frames_per_batch=8, total_frames=8) as c:
        (b,) = list(c)
    for key in ("loc", "scale", "action"):
        assert b[key].shape == (2, 4, 1), key
    log_prob_key = next(k for k in b.keys() if "log_prob" in k)
    expected = Normal(b["loc"], b["scale"]).log_prob(b["action"])
    torch.testing.assert_close(b[log_prob_key].reshape(expected.shape), expected)

    with Collector(env, actor, frames_per_batch=8, total_frames=8,
                   exploration_type=InteractionType.DETERMINISTIC) as c:
        (b,) = list(c)
    torch.testing.assert_close(b["action"], b["loc"])

    seq = TensorDictSequential(TensorDictModule(torch.nn.Linear(3, 1), ["observation"], ["action"]))
    with Collector(env, seq, frames_per_batch=4, total_frames=4) as c:
        assert next(iter(c))["action"].shape == (2, 2, 1)
    env.close()


def test_plain_module_and_tensordict_callable_and_factory():
    env = CountingEnv()
    with Collector(env, torch.nn.Linear(1, 1), frames_per_batch=4, total_frames=4) as c:
        assert next(iter(c))["action"].shape == (4, 1)

    def td_policy(tensordict):
        return tensordict.set("action", torch.full((1,), 0.5))

    with Collector(env, td_policy, frames_per_batch=4, total_frames=4) as c:
        assert (next(iter(c))["action"] == 0.5).all()
    with Collector(env, policy_factory=lambda: torch.nn.Linear(1, 1), frames_per_batch=4, total_frames=4) as c:
        assert isinstance(c.policy, torch.nn.Linear)


def test_update_policy_weights_forms():
    env = CountingEnv(limit=1e9)
    module = torch.nn.Linear(1, 1)
    with torch.no_grad():
        module.weight.zero_(), module.bias.fill_(0.25)
    c = Collector(env, policy_factory=lambda: torch.nn.Linear(1, 1), frames_per_batch=2, total_frames=-1)
    c.update_policy_weights_(module)
    assert (c.rollout()["action"] == 0.25).all()
    with torch.no_grad():
        module.bias.fill_(0.5)
    c.update_policy_weights_(TensorDict.from_module(module))
    assert (c.rollout()["action"] == 0.5).all()
    c.update_policy_weights_({"weight": torch.zeros(1, 1), "bias": torch.full((1,), 0.75)})
    assert (c.rollout()["action"] == 0.75).all()
    c.update_policy_weights_(weights_dict={"policy": {"weight": torch.zeros(1, 1), "bias": torch.ones(1)}})
    assert (c.rollout()["action"] == 1.0).all()
    c.update_policy_weights_(policy=module)
    assert (c.rollout()["action"] == 0.5).all()
    with pytest.raises(ValueError, match=r"do not match the policy's parameters: missing \['bias', 'weight'\], unexpected \['w'\]"):
        c.update_policy_weights_({"w": torch.zeros(1)})
    with pytest.raises(ValueError, match="model_id='critic'"):
        c.update_policy_weights_(module, model_id="critic")
    with pytest.raises(ValueError, match=r"weights_dict has unknown models \['critic'\]"):
        c.update_policy_weights_(weights_dict={"critic": {}})
    with pytest.raises(TypeError, match=r"unexpected arguments \['params'\]"):
        c.update_policy_weights_(params=module)
    with pytest.raises(ValueError, match="only worker 0"):
        c.update_policy_weights_(module, worker_ids=[1])
    c.shutdown()


def test_update_without_arguments_pulls_from_the_source_policy_on_a_tensordict_module():
    policy = TensorDictModule(torch.nn.Linear(1, 1), in_keys=["observation"], out_keys=["action"])
    c = Collector(CountingEnv(limit=1e9), policy, frames_per_batch=2, total_frames=-1)
    with torch.no_grad():
        policy.module.bias.fill_(0.3), policy.module.weight.zero_()
    c.update_policy_weights_()  # the collector runs this very object: visible at once
    assert torch.allclose(c.rollout()["action"], torch.tensor(0.3))
    c.shutdown()


def test_set_seed_makes_runs_identical():
    def run(seed):
        with Collector(GymEnv("CartPole-v1", num_envs=2), None, frames_per_batch=40, total_frames=80) as c:
            c.set_seed(seed)
            return torch.cat([b["next", "observation"] for b in c])

    assert torch.equal(run(3), run(3))
    assert not torch.equal(run(3), run(4))


def test_state_dict_roundtrip():
    from reap import VecNorm

    env = TransformedEnv(GymEnv("Pendulum-v1"), VecNorm())
    c = Collector(env, linear_policy(), frames_per_batch=10, total_frames=-1)
    c.rollout()
    state = c.state_dict()
    assert state["frames"] == 10 and "_extra_state" in state["env_state_dict"]
    other = Collector(TransformedEnv(GymEnv("Pendulum-v1"), VecNorm()), linear_policy(seed=1),
                      frames_per_batch=10, total_frames=-1)
    other.load_state_dict(state)
    assert other.frames == 10
    torch.testing.assert_close(other.policy.module.weight, c.policy.module.weight)
    torch.testing.assert_close(other.env.state_dict(), c.env.state_dict())
    c.shutdown(), other.shutdown()


def test_shutdown_is_idempotent_and_closes_owned_env():
    envs = []

    def make():
        envs.append(GymEnv("CartPole-v1"))
        return envs[-1]

    c = Collector(make, None, frames_per_batch=4, total_frames=4)
    c.shutdown()
    c.shutdown()
    assert envs[0].is_closed
    with pytest.raises(RuntimeError, match="Collector: the collector was shut down; create a new one"):
        next(iter(c))


CLOSED = "^Collector: the collector was shut down; create a new one$"  # reap_mp's _check_open wording


def test_iterator_started_before_shutdown_stops_yielding():
    c = Collector(GymEnv("CartPole-v1"), None, frames_per_batch=4, total_frames=-1)
    it = iter(c)
    next(it)
    c.next()
    c.shutdown()
    with pytest.raises(RuntimeError, match=CLOSED):
        next(it)
    for _ in range(2):  # the iterator kept by next() too, every time
        with pytest.raises(RuntimeError, match=CLOSED):
            c.next()
    assert c.frames == 8


@pytest.mark.parametrize("call", [
    lambda c: c.update_policy_weights_({"weight": torch.ones(1, 3), "bias": torch.ones(1)}),
    lambda c: c.update_policy_weights_(),
    lambda c: c.set_seed(1),
    lambda c: c.reset(),
    lambda c: c.rollout(),
    lambda c: c.state_dict(),
    lambda c: c.load_state_dict({"frames": 0}),
], ids=["update_weights", "update_from_policy", "set_seed", "reset", "rollout", "state_dict",
        "load_state_dict"])
def test_calls_after_shutdown_raise_like_the_multiprocess_collectors(call):
    c = Collector(GymEnv("Pendulum-v1"), torch.nn.Linear(3, 1), frames_per_batch=4, total_frames=-1)
    c.rollout()
    before = {k: v.clone() for k, v in c.policy.state_dict().items()}
    c.shutdown()
    with pytest.raises(RuntimeError, match=CLOSED):
        call(c)
    assert c.frames == 4
    for key, value in c.policy.state_dict().items():  # nothing was applied
        assert torch.equal(value, before[key])


def test_list_of_env_fns_runs_serially_batched():
    with Collector([lambda: GymEnv("CartPole-v1")] * 3, None, frames_per_batch=6, total_frames=6) as c:
        assert next(iter(c)).shape == (3, 2)


def test_return_same_td():
    with Collector(GymEnv("CartPole-v1"), None, frames_per_batch=4, total_frames=8, return_same_td=True) as c:
        a, b = list(c)
    assert a is b
    with Collector(GymEnv("CartPole-v1"), None, frames_per_batch=4, total_frames=8) as c:
        a, b = list(c)
    assert a is not b and not torch.equal(a["observation"], b["observation"])


def test_track_traj_ids_false_drops_the_key():
    with Collector(GymEnv("CartPole-v1"), None, frames_per_batch=4, total_frames=4, track_traj_ids=False) as c:
        assert "collector" not in next(iter(c)).keys()


# ---- bad input ------------------------------------------------------------------------------
@pytest.mark.parametrize("fpb", [0, -5, 2.5, True])
def test_bad_frames_per_batch(fpb):
    with pytest.raises(ValueError, match="frames_per_batch must be a positive int"):
        Collector(GymEnv("CartPole-v1"), None, frames_per_batch=fpb)


@pytest.mark.parametrize("total", [0, -2, 1.5])
def test_bad_total_frames(total):
    with pytest.raises(ValueError, match="total_frames must be a positive int, or -1"):
        Collector(GymEnv("CartPole-v1"), None, frames_per_batch=4, total_frames=total)


def test_policy_that_does_not_write_the_action():
    policy = TensorDictModule(torch.nn.Linear(3, 1), in_keys=["observation"], out_keys=["act"])
    with pytest.raises(KeyError, match="policy does not write the action key 'action'"):
        Collector(GymEnv("Pendulum-v1"), policy, frames_per_batch=4)


def test_action_of_the_wrong_shape():
    with pytest.raises(ValueError, match=r"policy: the action has shape \(2,\).*expects \(1,\)"):
        Collector(GymEnv("Pendulum-v1"), torch.nn.Linear(3, 2), frames_per_batch=4)


def test_float_action_for_discrete_env():
    with pytest.raises(TypeError, match=r"and 0.5 is not a whole number; return an integer action \(e.g. logits.argmax"):
        Collector(GymEnv("CartPole-v1", categorical_action_encoding=True),
                  lambda observation: torch.tensor(0.5), frames_per_batch=4)
    with pytest.raises(TypeError, match=r"expects torch.int64 \(OneHot\), and .* is not a whole number; return an "
                                        r"integer action \(e.g. one_hot"):
        Collector(GymEnv("CartPole-v1"), lambda observation: observation[:2], frames_per_batch=4)


def _one_hot_sample(observation):
    return torch.distributions.OneHotCategorical(logits=observation[..., :2]).sample()  # float 0./1.


def test_float_one_hot_actions_step_the_env_as_integers_and_stay_float_in_the_batch():
    # torch's OneHotCategorical samples floats; TorchRL's collector passes them on, reap casts them exactly
    torch.manual_seed(0)
    with Collector(GymEnv("CartPole-v1"), _one_hot_sample, frames_per_batch=50, init_random_frames=50) as collector:
        batches = [collector.next(), collector.next()]  # random actions, then the policy's
    for batch in batches:
        assert batch["action"].dtype == torch.float32 and set(batch["action"].sum(-1).tolist()) == {1.0}
        # the env got each one-hot: pushing right (index 1) speeds the cart up, left slows it down
        speed_up = batch["next", "observation"][:, 1] > batch["observation"][:, 1]
        assert torch.equal(speed_up, batch["action"][:, 1] == 1.0)
    assert len(set(batches[1]["action"][:, 1].tolist())) == 2  # both actions were taken


def test_a_float_action_that_is_not_whole_later_is_an_error_at_its_batch():
    calls = []

    def policy(observation):
        calls.append(1)
        return torch.tensor([1.0, 0.0]) if len(calls) < 6 else torch.tensor([0.6, 0.4])

    with Collector(GymEnv("CartPole-v1"), policy, frames_per_batch=4) as collector:
        collector.next()  # the probe and 4 steps: whole
        with pytest.raises(TypeError, match=r"the action is float32 but the env expects torch.int64 \(OneHot\), and "
                                            r"0.6 is not a whole number"):
            collector.next()


class _GrowByActionEnv(EnvBase):
    """The observation grows by the action, which an int8 Binary spec holds (TorchRL's
    CountingBatchedEnv in its test_policy_with_mask)."""

    def __init__(self):
        super().__init__()
        self.observation_spec = Composite(observation=Unbounded(shape=(1,), dtype=torch.int32))
        self.action_spec = Binary(1, dtype=torch.int8)
        self.reward_spec = Unbounded(shape=(1,))

    def _reset(self, tensordict):
        self.count = torch.full((1,), 10, dtype=torch.int32)
        return TensorDict(observation=self.count.clone())

    def _step(self, tensordict):
        self.count = self.count + tensordict["action"].to(torch.int32)
        done = torch.zeros(1, dtype=torch.bool)
        return TensorDict(observation=self.count.clone(), reward=torch.zeros(1), done=done, terminated=done.clone())

    def _set_seed(self, seed):
        pass


def test_an_action_the_spec_dtype_cannot_hold_is_an_error_not_a_wrap():
    # the observation doubles: 10, 20, 40, 80, then 160, which int8 would wrap to -96
    with Collector(_GrowByActionEnv(), lambda observation: observation.clone(), frames_per_batch=4) as collector:
        batch = collector.next()
        assert batch["action"].dtype == torch.int32  # the policy's, as TorchRL's
        assert batch["next", "observation"].flatten().tolist() == [20, 40, 80, 160]
        with pytest.raises(TypeError, match=r"the action is int32 but the env expects torch.int8 \(Binary\), and 160 "
                                            r"does not fit it; return actions the spec holds"):
            collector.next()


def test_policy_reading_a_missing_key():
    policy = TensorDictModule(torch.nn.Linear(3, 1), in_keys=["pixels"], out_keys=["action"])
    with pytest.raises(KeyError, match=r"policy reads \['pixels'\]"):
        Collector(GymEnv("Pendulum-v1"), policy, frames_per_batch=4)


def test_other_bad_arguments():
    env = GymEnv("CartPole-v1")
    with pytest.raises(ValueError, match="pass policy or policy_factory, not both"):
        Collector(env, torch.nn.Linear(4, 1), policy_factory=lambda: None, frames_per_batch=4)
    with pytest.raises(ValueError, match="max_frames_per_traj must be a positive int"):
        Collector(env, None, frames_per_batch=4, max_frames_per_traj=0)
    with pytest.raises(ValueError, match="exploration_type must be"):
        Collector(env, None, frames_per_batch=4, exploration_type="greedy")
    with pytest.raises(TypeError, match=r"^Collector: create_env_fn returned str; it must return a reap EnvBase"):
        Collector(lambda: "CartPole-v1", None, frames_per_batch=4)
    with pytest.raises(ValueError, match="env_device='cuda"):
        Collector(env, None, frames_per_batch=4, env_device="cuda")
    with pytest.raises(TypeError, match="replay_buffer must have an extend"):
        Collector(env, None, frames_per_batch=4, replay_buffer=object())
    with pytest.raises(TypeError, match="frames_per_batch"):
        Collector(env, None)
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        Collector(env, None, frames_per_batch=4).shutdown()


def test_batches_name_their_last_dim_time_as_torchrls():
    # TorchRL names it: its value estimators and RewardSum's offline mode find the time dim by name
    for num_envs, split_trajs, names in [(None, False, ["time"]), (2, False, [None, "time"]),
                                         (None, True, [None, "time"])]:
        with Collector(lambda n=num_envs: GymEnv("Pendulum-v1", num_envs=n), None, frames_per_batch=8,
                       total_frames=8, split_trajs=split_trajs) as collector:
            batch = next(iter(collector))
            assert batch.names == names, (num_envs, split_trajs)
    offline = RewardSum(in_keys=[("next", "reward")], out_keys=[("next", "ret")])
    assert torch.equal(offline(batch)["next", "ret"], batch["next", "reward"].cumsum(-1))
