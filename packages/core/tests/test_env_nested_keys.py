"""A TorchRL-style custom env with nested keys, an agents' group and its own done flags
(reap_testing's ``AgentsEnv``), run by reap's ``EnvBase`` (no TorchRL needed): key lists, specs, resets of some envs, rollouts, the
env's ``step_mdp`` and ``check_env_specs``, as TorchRL's ``EnvBase`` runs such an env."""

import functools

import pytest
import torch
from tensordict import TensorDict

from reap.envs import EnvBase
from reap.envs.utils import check_env_specs
from reap.specs import Categorical, Composite, Unbounded
from reap_testing import AgentsEnv


def ones(td):
    return td.set(("agents", "action"), torch.ones(2, 3, dtype=torch.int64))


def test_keys_and_specs_of_a_nested_env():
    env = AgentsEnv()
    assert env.action_keys == [("agents", "action")] and env.action_key == ("agents", "action")
    assert env.reward_keys == [("agents", "reward")] and env.observation_keys == [("agents", "obs")]
    assert env.done_keys == ["done", "terminated", ("agents", "done"), ("agents", "terminated")]
    assert env.done_keys_groups == [["done", "terminated"], [("agents", "done"), ("agents", "terminated")]]
    assert env.reset_keys == ["_reset", ("agents", "_reset")]
    assert isinstance(env.action_spec, Composite) and env.action_spec_unbatched["agents", "action"].shape == (3,)
    assert env.full_done_spec["agents"].shape == (2, 3) and env.is_spec_locked
    assert env.state_dict()["count"].shape == (2, 3, 1) and env.numel() == env.numel == 2
    check_env_specs(env)


def test_rollout_of_a_nested_env():
    env = AgentsEnv()
    td = env.rollout(5, ones)
    assert td.batch_size == (2, 3) and td.names == [None, "time"]  # stopped at the first done step
    assert td["next", "agents", "obs"][0, :, 0, 0].tolist() == [1.0, 2.0, 3.0]
    assert td["next", "done"][..., 0].tolist() == [[False, False, True]] * 2
    assert td["next", "agents", "terminated"].equal(td["next", "agents", "done"])  # completed from "done"
    assert "reward" not in td.keys() and ("agents", "action") in td.keys(True)
    # actions= sets each item at the first key of the action spec, as TorchRL does: here the group
    replayed = env.rollout(2, actions=[TensorDict(action=torch.ones(2, 3, dtype=torch.int64), batch_size=(2, 3))] * 2)
    assert replayed["next", "agents", "obs"][0, :, 0, 0].tolist() == [1.0, 2.0]
    longer = env.rollout(5, ones, break_when_any_done=False)
    assert longer["agents", "obs"][0, :, 0, 0].tolist() == [0.0, 1.0, 2.0, 0.0, 1.0]  # reset after the done step


def test_reset_of_some_envs_and_step_mdp():
    env = AgentsEnv()
    env.reset()
    stepped = env.step(env.rand_action(env.reset()).update(
        {("agents", "action"): torch.tensor([[2, 2, 2], [0, 0, 0]])}))
    root = env.step_mdp(stepped)
    assert ("agents", "action") in root.keys(True) and ("agents", "reward") not in root.keys(True)
    root["_reset"] = torch.tensor([[True], [False]])
    out = env.reset(root)
    assert out is root and out["agents", "obs"][:, 0, 0].tolist() == [0.0, 0.0]
    env.step(out.update({("agents", "action"): torch.ones(2, 3, dtype=torch.int64)}))
    assert env.count[:, 0, 0].tolist() == [1.0, 1.0]
    env.action_spec = Composite(a=Categorical(2, shape=(2,)), b=Categorical(2, shape=(2,)), shape=(2,))
    assert env.action_keys == ["a", "b"] and env.is_spec_locked
    with pytest.raises(KeyError, match="action_key requested but more than one key"):
        _ = env.action_key


def test_class_level_specs_are_the_instance_s():
    class Preset(AgentsEnv):
        _output_spec = Composite(full_observation_spec=Composite(extra=Unbounded(shape=(1,))))

        def __init__(self):
            EnvBase.__init__(self)

    env = Preset()
    assert env.observation_keys == ["extra"] and env.done_keys == ["done", "terminated"]
    assert "_output_spec" not in Preset.__dict__ and env.reward_keys == ["reward"]


def test_a_transform_s_nested_entry_is_each_step_s_own_in_a_rollout():
    # the root of step t+1 is built from step t's "next"; a transform writing into a nested
    # entry then must not write into step t's sub-TensorDict (every step read the last value)
    from reap import GymEnv, RenameTransform, TransformedEnv

    env = TransformedEnv(GymEnv("Pendulum-v1"),
                         RenameTransform(["observation"], [("agent", "obs")], create_copy=True))
    env.set_seed(0)
    rollout = env.rollout(6, break_when_any_done=False)
    assert torch.equal(rollout["agent", "obs"], rollout["observation"])
    assert torch.equal(rollout["next", "agent", "obs"], rollout["next", "observation"])
    assert torch.equal(rollout["agent", "obs"][1:], rollout["next", "agent", "obs"][:-1])
    assert rollout["agent", "obs"][:, 0].unique().numel() == 6  # the pendulum moves


def test_a_transformed_nested_env_keeps_each_group_s_batch_size():
    from reap.envs import SerialEnv, TransformedEnv
    from reap.envs.transforms import RewardSum

    env = TransformedEnv(AgentsEnv(), RewardSum(in_keys=[("agents", "reward")]))
    assert env.reset()["agents"].batch_size == (2, 3)
    rollout = env.rollout(3, ones)
    assert rollout["agents"].batch_size == rollout["next", "agents"].batch_size == (2, 3, 3)
    assert rollout["next", "agents", "episode_reward"][0, :, 0].flatten().tolist() == [1.0, 3.0, 6.0]
    serial = SerialEnv(2, AgentsEnv)  # two batch dims above each group
    assert serial.reset()["agents"].batch_size == (2, 2, 3)
    assert serial.rollout(2, lambda td: td.set(("agents", "action"), torch.ones(2, 2, 3, dtype=torch.int64))
                          )["next", "agents", "obs"].shape == (2, 2, 2, 3, 1)



def test_a_transformed_serial_env_of_several_actions_steps():
    from reap.envs import SerialEnv, TransformedEnv
    from reap.envs.transforms import RewardSum

    def policy(td):
        return td.set(("agents", "action"), torch.ones(2, 2, 3, dtype=torch.int64)).set(
            "action", torch.zeros(2, 2, 1, dtype=torch.int64))

    env = TransformedEnv(SerialEnv(2, functools.partial(AgentsEnv, root_action=True)), RewardSum(in_keys=[("agents", "reward")]))
    rollout = env.rollout(3, policy)
    assert rollout["next", "agents", "episode_reward"][1, 0, :, 2].flatten().tolist() == [1.0, 3.0, 6.0]


@pytest.mark.parametrize("group", [None, "agent"])
def test_serial_env_resets_only_the_sub_env_whose_nested_done_fired(group):
    """TorchRL's rule: a done flag in a nested group resets only the sub-env it fired in (reap reset
    them all when the group was not the root)."""
    from reap.envs import SerialEnv
    from reap_testing import CountingEnv

    env = SerialEnv(2, CountingEnv, create_env_kwargs=[{"limit": 2.0, "group": group}, {"limit": 3.0, "group": group}])
    assert env.reset_keys == ["_reset" if group is None else (group, "_reset")]
    td, counts = env.reset(), []
    for _ in range(5):
        stepped, td = env.step_and_maybe_reset(td.set("action", torch.ones(2, 1)))
        counts.append(stepped["next", "observation"].flatten().tolist())
    assert counts == [[1, 1], [2, 2], [1, 3], [2, 1], [1, 2]]
    env.close()


def _obs_counts(td) -> list:
    """Per sub-env, the count each agent of an UnequalAgentsEnv sees (and the agents' obs sizes)."""
    agents = td["next", "agents"]
    return [[(agents[i][a]["obs"][0].item(), agents[i][a]["obs"].numel()) for a in range(2)] for i in range(2)]


def test_serial_env_of_heterogeneous_envs_steps_on_tensordicts():
    """Sub-envs with a heterogeneous (lazy-stacked) group, which no step array holds, step as
    TorchRL's SerialEnv steps them: lazy stacks, a done sub-env reset alone; through a collector too."""
    from reap.collectors import Collector
    from reap.envs import SerialEnv
    from reap_testing import UnequalAgentsEnv

    env = SerialEnv(2, UnequalAgentsEnv, create_env_kwargs=[{"limit": 2}, {"limit": 3}])
    assert env.full_observation_spec["agents"].shape == (2, 2)
    check_env_specs(env, break_when_any_done="both")
    td, seen = env.reset(), []
    for _ in range(4):
        stepped, td = env.step_and_maybe_reset(td.set("action", torch.ones(2, 1)))
        seen.append(_obs_counts(stepped))
    assert seen == [[[(c0, 2), (c0, 3)], [(c1, 2), (c1, 3)]] for c0, c1 in [(1, 1), (2, 2), (1, 3), (2, 1)]]
    rollout = env.rollout(3, break_when_any_done=False)
    assert rollout.batch_size == (2, 3) and rollout["next", "agents"][0, 2][1]["obs"].tolist() == [1.0, 1.0, 1.0]
    with Collector(env, None, frames_per_batch=8, total_frames=8) as collector:
        batch = next(iter(collector))
    assert batch.batch_size == (2, 4)
    assert batch["collector", "traj_ids"].tolist() == [[0, 0, 2, 2], [1, 1, 1, 3]]
    assert [batch["next", "agents"][0, t][1]["obs"][0].item() for t in range(4)] == [1.0, 2.0, 1.0, 2.0]
    env.close()


def test_serial_env_forwards_public_attributes_and_methods_to_its_sub_envs():
    # TorchRL's forwarding: what the batched env lacks, its sub-envs answer, one value each
    from reap.envs import SerialEnv
    from reap.envs.transforms import StepCounter, TransformedEnv
    from reap_testing import CountingEnv

    env = SerialEnv(2, CountingEnv, create_env_kwargs=[{"limit": 2.0}, {"limit": 3.0}])
    env.rollout(2, lambda td: td.set("action", torch.tensor([[1.0], [2.0]])), break_when_any_done=False)
    assert env.limit == [2.0, 3.0]
    assert env.scaled_count(10.0) == [20.0, 40.0] and env.scaled_count.__name__ == "scaled_count"
    assert TransformedEnv(env, StepCounter()).scaled_count() == [2.0, 4.0]  # through a transformed env too
    with pytest.raises(ValueError, match="factor must not be zero"):
        env.scaled_count(0)
    with pytest.raises(AttributeError, match="'SerialEnv' object has no attribute 'nothing', nor have its sub-envs"):
        _ = env.nothing
    with pytest.raises(AttributeError, match="no attribute '_flags'"):  # private names are not forwarded
        _ = env._flags
    env.close()


def test_a_batched_sub_env_stepped_in_part_gets_its_own_step_rows():
    # a sub-env with a string steps on TensorDicts; TorchRL's partial steps reach it row by row
    from tensordict import NonTensorData

    from reap.envs import SerialEnv
    from reap.specs import NonTensor

    class Labelled(EnvBase):
        def __init__(self):
            super().__init__(batch_size=(2,))
            self.observation_spec = Composite(observation=Unbounded(shape=(2, 1)), label=NonTensor(shape=(2,)),
                                              shape=(2,))
            self.action_spec = Unbounded(shape=(2, 1))
            self.seen = []

        def _reset(self, td):
            return TensorDict(observation=torch.zeros(2, 1), label=NonTensorData("a", batch_size=[2]), batch_size=[2])

        def _step(self, td):
            self.seen.append(None if td.get("_step", None) is None else td["_step"].flatten().tolist())
            return TensorDict(observation=td["observation"] + 1, label=NonTensorData("b", batch_size=[2]),
                              reward=torch.zeros(2, 1), done=torch.zeros(2, 1, dtype=torch.bool), batch_size=[2])

        def _set_seed(self, seed):
            pass

    env = SerialEnv(2, Labelled)
    td = env.reset().set("action", torch.zeros(2, 2, 1))
    env.step(td.set("_step", torch.tensor([[True, False], [True, True]])))
    assert [sub.seen for sub in env.envs] == [[[True, False]], [None]]
