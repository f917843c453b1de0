"""What TorchRL's own transform tests (test/transforms/test_{tensor,observation,env}_transforms.py)
ask of reap's transforms, envs and buffers, checked here without TorchRL."""

import pytest
import torch
from tensordict import TensorDict

from reap import Collector
from reap.data import LazyTensorStorage, ReplayBuffer
from reap.envs import (
    CatFrames,
    EnvBase,
    GymEnv,
    ObservationNorm,
    Stack,
    StepCounter,
    TransformedEnv,
    check_env_specs,
    step_mdp,
)
from reap.specs import Categorical, Composite, Unbounded
from reap_testing import CountingEnv


def ones(td):
    return td.set("action", torch.ones(1))


def test_transformed_torchrl_style_env_gives_the_done_specs_flags_and_batches_keep_truncated():
    env = TransformedEnv(CountingEnv(limit=3.0), ObservationNorm(0.0, 2.0, in_keys=["observation"]))
    assert list(env.done_spec.keys()) == ["done", "terminated"]
    check_env_specs(env)  # the fake TensorDict and the data have the same keys
    td = env.rollout(4, ones)
    assert sorted(td.keys()) == ["action", "done", "next", "observation", "terminated"]
    assert sorted(td["next"].keys()) == ["done", "observation", "reward", "terminated"]
    assert "truncated" not in env.reset().keys() and "truncated" not in env.fake_tensordict()["next"].keys()
    policy = lambda td: td.set("action", torch.ones(td.shape + (1,)))  # noqa: E731
    with Collector(env, policy, frames_per_batch=4, total_frames=4) as collector:
        batch = next(iter(collector))
    assert batch["next", "truncated"].tolist() == [[False]] * 4  # reap's batches carry it


def test_step_takes_an_action_missing_a_trailing_singleton_dim_and_refuses_other_shapes():
    env = TransformedEnv(CountingEnv(limit=10.0), StepCounter())
    env.reset()
    flat = env.step(TensorDict(action=torch.tensor(2.0), observation=torch.zeros(1)))  # spec (1,)
    assert flat["next", "observation"].tolist() == [2.0]
    gym = GymEnv("Pendulum-v1", num_envs=2)
    try:
        td = gym.reset()
        assert gym.step(td.set("action", torch.zeros(2)))["next", "observation"].shape == (2, 3)  # spec (2, 1)
        with pytest.raises(ValueError, match=r"step: the action has shape \(2, 2\) but action_spec is"):
            gym.step(td.set("action", torch.zeros(2, 2)))
    finally:
        gym.close()


def test_step_counter_hooks_run_without_an_env_as_torchrl_calls_them():
    counter = StepCounter(max_steps=3)
    assert counter.all_done_keys == ["done"] and counter.all_truncated_keys == ["truncated"]
    done = torch.zeros(2, 1, dtype=torch.bool)
    td = TensorDict({"done": done, ("next", "done"): done, "step_count": torch.tensor([[5], [1]]),
                     "_reset": torch.tensor([[True], [False]])}, [2])
    td = counter._reset(td, td.empty())
    assert td["step_count"].tolist() == [[0], [1]]
    td.set("next", TensorDict({"done": done}, [2]))
    nxt = counter._step(td, td["next"])
    assert nxt["step_count"].tolist() == [[1], [2]] and nxt["truncated"].tolist() == [[False], [False]]
    td = step_mdp(td.set("next", nxt))
    nxt = counter._step(td, TensorDict({"done": done}, [2]))
    assert nxt["step_count"].tolist() == [[2], [3]] and nxt["truncated"].tolist() == [[False], [True]]
    assert nxt["done"].tolist() == [[False], [True]]
    with pytest.raises(KeyError, match="StepCounter._reset without an env needs a 'done' entry"):
        counter._reset(TensorDict(), TensorDict())


def test_step_counter_all_done_keys_list_every_group():
    from reap_testing import AgentsEnv

    env = TransformedEnv(AgentsEnv(), StepCounter(max_steps=2))
    assert env.transform.step_count_keys == ["step_count"]  # nested groups count with the outer one
    assert env.transform.all_done_keys == ["done", ("agents", "done")]
    assert env.transform.all_truncated_keys == ["truncated", ("agents", "truncated")]


def test_catframes_rb_transform_and_sampler_give_the_stacks_the_env_made():
    N = 3
    frames = CatFrames(N=N, dim=-1, in_keys=["observation"], out_keys=["stack"])
    env = TransformedEnv(CountingEnv(limit=8.0), frames)
    rollout = env.rollout(40, ones, break_when_any_done=False)  # 5 trajectories of 8 steps
    by_count = {(t, float(o)): (s.tolist(), n.tolist()) for t, (o, s, n) in enumerate(
        zip(rollout["observation"], rollout["stack"], rollout["next", "stack"]))}
    transform, sampler = frames.make_rb_transform_and_sampler(batch_size=8)
    assert sampler.slice_len == N
    rb = ReplayBuffer(storage=LazyTensorStorage(40), sampler=sampler, transform=transform)
    rb.extend(rollout)
    assert "stack" not in rb.storage[:].keys() and ("next", "stack") not in rb.storage[:].keys(True)
    torch.manual_seed(0)
    sample, info = rb.sample(8, return_info=True)
    assert sample.shape == (8,) and sample["stack"].shape == (8, N)
    steps = info["index"][0].reshape(8, N)[:, -1]  # the step each item stands for: its slice's last
    for step, item in zip(steps.tolist(), sample.unbind(0)):
        stack, next_stack = by_count[(step, float(item["observation"]))]
        assert item["stack"].tolist() == stack and item["next", "stack"].tolist() == next_stack
    with pytest.raises(ValueError, match="batch_size must be a positive int, got 0"):
        frames.make_rb_transform_and_sampler(batch_size=0)


class PairEnv(EnvBase):
    """Two agents ``("agents", "a0")`` and ``("agents", "a1")``, each with its count and done flag."""

    def __init__(self):
        super().__init__()
        flag = Categorical(2, shape=(1,), dtype=torch.bool)
        agent = lambda: Composite(obs=Unbounded((2,)))  # noqa: E731
        self.observation_spec = Composite(agents=Composite(a0=agent(), a1=agent()))
        self.action_spec = Unbounded((1,))
        self.done_spec = Composite(done=flag, terminated=flag.clone(),
                                   agents=Composite(a0=Composite(done=flag.clone()), a1=Composite(done=flag.clone())))
        self.count = 0

    def _obs(self, done):
        agent = lambda i: TensorDict(obs=torch.full((2,), float(self.count + i)), done=done.clone())  # noqa: E731
        return TensorDict(agents=TensorDict(a0=agent(0), a1=agent(10)))

    def _reset(self, td):
        self.count = 0
        return self._obs(torch.zeros(1, dtype=torch.bool))

    def _step(self, td):
        self.count += 1
        done = torch.tensor([self.count >= 3])
        return self._obs(done).update(reward=td["action"].clone(), done=done, terminated=done.clone())

    def _set_seed(self, seed):
        pass


def test_stack_of_whole_groups_stacks_their_entries_as_torchrl():
    keys = [("agents", "a0"), ("agents", "a1")]
    env = TransformedEnv(PairEnv(), Stack(in_keys=keys, out_key="stacked", in_key_inv="stacked", out_keys_inv=keys))
    assert ("stacked", "obs") in env.observation_spec.keys(True) and ("stacked", "done") in env.done_keys
    check_env_specs(env)
    td = env.rollout(3, ones)
    assert "agents" not in td.keys() and td["next", "stacked", "obs"].shape == (3, 2, 2)
    assert td["next", "stacked", "obs"][:, :, 0].tolist() == [[1, 11], [2, 12], [3, 13]]
    assert td["next", "stacked", "done"][-1].all()


def test_transformed_env_batch_locked_is_the_base_envs_and_read_only():
    env = TransformedEnv(CountingEnv(), StepCounter())
    assert env.batch_locked
    with pytest.raises(RuntimeError, match="batch_locked is a read-only property"):
        env.batch_locked = False
