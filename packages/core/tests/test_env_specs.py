"""TorchRL's env spec API on every reap env: what TorchRL examples build their actors from."""

import functools

import pytest
import torch
from tensordict import LazyStackedTensorDict

import reap
from reap import GymEnv, SerialEnv, TransformedEnv
from reap.envs.utils import check_env_specs, step_mdp
from reap.specs import Bounded, Composite, OneHot, Unbounded
from reap_testing import CountingEnv


def pendulum_envs():
    from reap_mp import ParallelEnv

    yield "GymEnv", lambda: GymEnv("Pendulum-v1"), ()
    yield "GymEnv-vector", lambda: GymEnv("Pendulum-v1", num_envs=3), (3,)
    yield "SerialEnv", lambda: SerialEnv(2, lambda: GymEnv("Pendulum-v1")), (2,)
    # forkserver: the workers fork from a server that imported reap once, instead of each importing it
    yield "ParallelEnv", lambda: ParallelEnv(2, functools.partial(GymEnv, "Pendulum-v1"),
                                             mp_start_method="forkserver"), (2,)
    yield "TransformedEnv", lambda: TransformedEnv(GymEnv("Pendulum-v1"), reap.StepCounter()), ()


ENVS = list(pendulum_envs())


@pytest.mark.parametrize("name,make,batch", ENVS, ids=[e[0] for e in ENVS])
def test_spec_api_on_every_env(name, make, batch):
    env = make()
    try:
        assert env.batch_size == batch
        assert env.action_spec.shape == (*batch, 1)
        unbatched = env.action_spec_unbatched
        assert isinstance(unbatched, Bounded) and unbatched.shape == (1,)
        assert unbatched.space.low.tolist() == [-2.0] and unbatched.space.high.tolist() == [2.0]
        assert env.action_spec.space.high.shape == (*batch, 1)
        assert list(env.full_action_spec.keys()) == ["action"]
        assert env.full_action_spec["action"] == env.action_spec
        assert env.full_action_spec_unbatched["action"] == unbatched
        assert env.observation_spec_unbatched["observation"].shape == (3,)
        assert env.reward_spec.shape == (*batch, 1)
        assert sorted(env.done_spec.keys()) == ["done", "terminated", "truncated"]
        assert env.action_keys == ["action"] and env.reward_keys == ["reward"]
        assert env.done_keys == ["done", "terminated", "truncated"]
        action = env.action_spec.rand()
        assert env.action_spec.is_in(action) and not env.action_spec.is_in(action + 10.0)
        assert torch.equal(env.action_spec.zero(), torch.zeros(*batch, 1))
        fake = env.fake_tensordict()
        assert fake.batch_size == batch and fake["next", "reward"].shape == (*batch, 1)
        step = env.rand_step(env.reset())
        assert set(step.keys(True, True)) == set(fake.keys(True, True))
        check_env_specs(env)
    finally:
        env.close()


def test_custom_env_and_transforms_have_the_spec_api():
    env = CountingEnv()
    assert env.action_spec_unbatched == Bounded(0.0, 2.0, shape=(1,))
    assert env.observation_spec_unbatched == Composite(observation=Unbounded(shape=(1,)))
    check_env_specs(env)
    transformed = env.append_transform(reap.StepCounter())
    assert isinstance(transformed, TransformedEnv) and transformed.base_env is env
    transformed = transformed.insert_transform(0, reap.InitTracker())
    assert [type(t).__name__ for t in transformed.transform] == ["InitTracker", "StepCounter"]
    assert sorted(transformed.fake_tensordict().keys()) == [  # no truncated: StepCounter has no max_steps
        "action", "done", "is_init", "next", "observation", "step_count", "terminated"]
    check_env_specs(transformed)
    cart = GymEnv("CartPole-v1", num_envs=2)
    assert cart.action_spec_unbatched == OneHot(2, dtype=torch.int64)
    assert cart.action_spec_unbatched.space.n == 2
    check_env_specs(cart)


def test_check_env_specs_names_what_is_wrong():
    class Liar(CountingEnv):
        def _step(self, td):
            out = super()._step(td)
            out["observation"] = out["observation"].double()
            return out

    class Liar2(CountingEnv):
        def __init__(self):
            super().__init__()
            self.observation_spec = Composite(observation=Unbounded(shape=(2,)))

    with pytest.raises(AssertionError, match=r"The shapes of the real and fake tensordict don't match for key "
                                             r"observation. Got fake=torch.Size\(\[3, 2\]\) and real=torch.Size"):
        check_env_specs(Liar2())
    with pytest.raises(AssertionError, match="The dtypes of the real and fake tensordict don't match for key "
                                             "observation. Got fake=torch.float32 and real=torch.float64."):
        check_env_specs(Liar())

    class RewardAtReset(CountingEnv):  # the root of step 0 has a reward, the others not: no dense stack
        def _reset(self, td):
            return super()._reset(td).set("reward", torch.zeros(1))

    for run in (lambda env: check_env_specs(env), lambda env: env.rollout(3, return_contiguous=True)):
        with pytest.raises(RuntimeError, match=r"The reward key was present in the root tensordict of at least one of "
                                               r"the tensordicts to stack \(\['reward'\]\): the env's _reset writes"):
            run(RewardAtReset())


def test_an_env_whose_entries_grow_passes_check_env_specs_as_in_torchrl():
    # a -1 (dynamic) spec dim: rollouts lazy-stack, and the check takes the data's size there
    from reap_testing import GrowingEnv

    env = GrowingEnv(max_count=5)
    assert env._has_dynamic_specs and not CountingEnv()._has_dynamic_specs
    check_env_specs(env)
    check_env_specs(env, return_contiguous=False, break_when_any_done="both")
    rollout = env.rollout(3)
    assert isinstance(rollout, LazyStackedTensorDict)
    assert [step["next", "observation"].shape[0] for step in rollout.unbind(0)] == [2, 3, 4]
    with pytest.raises(RuntimeError, match="The environment specs are dynamic. Call rollout with "
                                           "return_contiguous=False."):
        env.rollout(3, return_contiguous=True)

    class WrongWidth(GrowingEnv):  # rows of 3 where the spec says 2: still caught
        def _observation(self):
            return torch.zeros(self.count + 1, 3)

    with pytest.raises(AssertionError, match="The shapes of the real and fake tensordict don't match for key "
                                             "observation"):
        check_env_specs(WrongWidth())


def test_rollout_keyword_arguments():
    env = CountingEnv(limit=3.0)
    ones = [torch.ones(1)] * 6
    td = env.rollout(6, actions=ones)
    assert td["next", "observation"].flatten().tolist() == [1.0, 2.0, 3.0]  # break_when_any_done
    td = env.rollout(6, actions=ones, break_when_any_done=False)
    assert td["next", "observation"].flatten().tolist() == [1.0, 2.0, 3.0, 1.0, 2.0, 3.0]
    seen = []
    env.rollout(3, actions=ones, callback=lambda e, t: seen.append(t["observation"].item()))
    assert seen == [1.0, 2.0]
    start = env.reset()
    start["observation"] = torch.full((1,), 1.0)
    env.count = start["observation"].clone()
    td = env.rollout(1, actions=ones, auto_reset=False, tensordict=start)
    assert td["next", "observation"].flatten().tolist() == [2.0]
    with pytest.raises(RuntimeError, match="set_truncated was set to True but no truncated key could be found"):
        env.rollout(2, actions=ones, set_truncated=True)  # as TorchRL: the env has no truncated flag
    td = env.add_truncated_keys().rollout(2, actions=ones, set_truncated=True)
    assert td["next", "truncated"].flatten().tolist() == [False, True]
    stacked = env.rollout(2, actions=ones, return_contiguous=False)  # steps alike: stacked densely, as TorchRL's
    assert not isinstance(stacked, LazyStackedTensorDict) and stacked.names == ["time"]
    policy = lambda t: t.set("action", torch.full((1,), 0.5))  # noqa: E731
    assert env.rollout(2, policy)["action"].flatten().tolist() == [0.5, 0.5]
    with pytest.raises(RuntimeError, match="tensordict must be provided when auto_reset is False"):
        env.rollout(2, auto_reset=False)
    with pytest.raises(ValueError, match="max_steps must be a positive int"):
        env.rollout(0)
    td = env.rollout(6, actions=ones, break_when_all_done=True)  # one env: stops at its end
    assert td["next", "observation"].flatten().tolist() == [1.0, 2.0, 3.0]


def test_step_mdp_moves_next_up():
    td = CountingEnv().rollout(2, actions=[torch.ones(1)] * 2)[0]
    out = step_mdp(td)
    assert sorted(out.keys()) == ["done", "observation", "terminated"]  # a TorchRL-style env: no truncated
    assert out["observation"].item() == 1.0
