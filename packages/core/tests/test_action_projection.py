"""``DiscreteActionProjection``: a policy of more one-hot actions than the env takes."""

import pytest
import torch
from tensordict import TensorDict

from reap.collectors import Collector
from reap.envs import DiscreteActionProjection, GymEnv, TransformedEnv
from reap.envs.utils import check_env_specs
from reap.specs import OneHot


def make_env():
    return TransformedEnv(GymEnv("CartPole-v1"), DiscreteActionProjection(2, 5))


def test_the_policy_sees_max_actions_and_the_env_gets_one_of_its_own():
    env = make_env()
    assert type(env.action_spec) is OneHot and env.action_spec.shape == (5,)
    check_env_specs(env)
    rollout = env.rollout(50, break_when_any_done=False)
    assert rollout["action"].shape == (50, 5) and bool((rollout["action"].sum(-1) == 1).all())
    with Collector(make_env, None, frames_per_batch=40, total_frames=40) as collector:
        assert next(iter(collector))["action"].shape == (40, 5)


def test_actions_past_the_env_are_drawn_among_its_own():
    t = DiscreteActionProjection(num_actions_effective=3, max_actions=6)
    kept = t.inv(TensorDict(action=torch.eye(6, dtype=torch.long)[:3]))["action"]
    assert torch.equal(kept, torch.eye(3, dtype=torch.long))
    torch.manual_seed(0)
    drawn = t.inv(TensorDict(action=torch.eye(6, dtype=torch.long)[[5] * 300], batch_size=[300]))["action"]
    assert drawn.shape == (300, 3) and set(drawn.argmax(-1).tolist()) == {0, 1, 2}
    padded = t(TensorDict(action=torch.eye(3, dtype=torch.long)[[2, 0]], batch_size=[2]))["action"]
    assert torch.equal(padded, torch.eye(6, dtype=torch.long)[[2, 0]])
    silent = DiscreteActionProjection(3, 6, include_forward=False)
    assert torch.equal(silent(TensorDict(action=torch.ones(3)))["action"], torch.ones(3))


def test_bad_sizes_are_refused():
    with pytest.raises(RuntimeError, match="The `max_actions` int must be greater or equal to `num_actions_effective`"):
        DiscreteActionProjection(4, 3)
    with pytest.raises(RuntimeError, match=r"action.shape\[-1\]=4 must match self.max_actions=6"):
        DiscreteActionProjection(3, 6).inv(TensorDict(action=torch.zeros(4)))


def test_the_same_spec_and_kept_actions_as_torchrls():
    torchrl_envs = pytest.importorskip("torchrl.envs")
    theirs = torchrl_envs.TransformedEnv(torchrl_envs.GymEnv("CartPole-v1"),
                                         torchrl_envs.DiscreteActionProjection(2, 5))
    ours = make_env()
    a, b = theirs.action_spec, ours.action_spec
    assert (type(a).__name__, a.shape, a.dtype) == (type(b).__name__, b.shape, b.dtype)
    for index in (0, 1):
        action = torch.nn.functional.one_hot(torch.tensor(index), 5)
        results = [env.transform.inv(TensorDict(action=action.clone()))["action"] for env in (theirs, ours)]
        assert torch.equal(results[0], results[1])
