"""``rollout(break_when_all_done=True)`` and partial steps (``"_step"``), against TorchRL 0.14.1.

The constants were recorded from TorchRL runs of the same envs (its ``SerialEnv`` of 3 envs with
the dynamics of ``reap_testing.CountingEnv``, and of ``GymEnv("CartPole-v1")`` seeded 0, 1, 2):
the rollout stops after the step where the last env is done, a done env is not stepped again and
its entries repeat its last step, and no ``"_step"`` entry reaches the output.
"""

import pytest
import torch

from reap import GymEnv, RewardSum, SerialEnv, StepCounter, TransformedEnv
from reap.envs.utils import step_mdp
from reap_testing import CountingEnv

LIMITS = (1.0, 6.0, 3.0)  # the envs are done after steps 1, 4 and 2 (0-based)
ACTIONS = [torch.full((3, 1), 0.5 * (i + 1)) for i in range(10)]

# TorchRL: SerialEnv(3, [CountingEnv(limit) ...]).rollout(10, actions=ACTIONS, break_when_all_done=True)
EXPECTED = {
    "observation": [[0.0, 0.5, 0.5, 0.5, 0.5], [0.0, 0.5, 1.5, 3.0, 5.0], [0.0, 0.5, 1.5, 1.5, 1.5]],
    "action": [[0.5, 1.0, 1.0, 1.0, 1.0], [0.5, 1.0, 1.5, 2.0, 2.5], [0.5, 1.0, 1.5, 1.5, 1.5]],
    ("next", "observation"): [[0.5, 1.5, 1.5, 1.5, 1.5], [0.5, 1.5, 3.0, 5.0, 7.5],
                              [0.5, 1.5, 3.0, 3.0, 3.0]],
    ("next", "reward"): [[0.5, 1.0, 1.0, 1.0, 1.0], [0.5, 1.0, 1.5, 2.0, 2.5], [0.5, 1.0, 1.5, 1.5, 1.5]],
    ("next", "done"): [[False, True, True, True, True], [False, False, False, False, True],
                       [False, False, True, True, True]],
    ("next", "terminated"): [[False, True, True, True, True], [False, False, False, False, True],
                             [False, False, True, True, True]],
    "done": [[False] * 5] * 3,
}
EXPECTED_KEYS = {"observation", "action", "done", "terminated", ("next", "observation"), ("next", "reward"),
                 ("next", "done"), ("next", "terminated")}  # no truncated: CountingEnv has none, as TorchRL's


class StepCountingEnv(CountingEnv):
    """``CountingEnv`` that counts the steps it is asked for."""

    def __init__(self, limit):
        super().__init__(limit=limit)
        self.steps = 0

    def _step(self, td):
        self.steps += 1
        return super()._step(td)


def counting_envs() -> SerialEnv:
    return SerialEnv(3, [lambda limit=limit: StepCountingEnv(limit) for limit in LIMITS])


def values(td, key):
    return td[key].squeeze(-1).tolist()


def test_stops_when_all_are_done_and_repeats_the_last_step_of_done_envs():
    env = counting_envs()
    marks = []
    td = env.rollout(10, actions=ACTIONS, break_when_all_done=True,
                     callback=lambda e, t: marks.append(values(t, "_step") if "_step" in t.keys() else None))
    assert td.batch_size == (3, 5)
    assert set(td.keys(True, True)) == EXPECTED_KEYS  # no "_step"
    for key, expected in EXPECTED.items():
        assert values(td, key) == expected, key
    # the callback (and the policy) see "_step": the envs not done yet
    assert marks == [None, [False, True, True], [False, True, False], [False, True, False]]
    assert [sub.steps for sub in env.envs] == [2, 5, 3]  # a done env is not stepped again


def test_transformed_serial_env_leaves_done_envs_alone():
    env = TransformedEnv(counting_envs(), StepCounter())
    env = env.append_transform(RewardSum())
    td = env.rollout(10, actions=ACTIONS, break_when_all_done=True)
    # TorchRL: TransformedEnv(SerialEnv(...), StepCounter()) + RewardSum(), same actions
    assert values(td, ("next", "observation")) == EXPECTED["next", "observation"]
    assert values(td, "step_count") == [[0, 1, 1, 1, 1], [0, 1, 2, 3, 4], [0, 1, 2, 2, 2]]
    assert values(td, ("next", "step_count")) == [[1, 2, 2, 2, 2], [1, 2, 3, 4, 5], [1, 2, 3, 3, 3]]
    assert values(td, ("next", "episode_reward")) == EXPECTED["next", "observation"]
    assert [sub.steps for sub in env.base_env.envs] == [2, 5, 3]


def test_break_when_any_done_false_is_the_same_and_false_all_done_keeps_the_default():
    env = counting_envs()
    td = env.rollout(10, actions=ACTIONS, break_when_all_done=True, break_when_any_done=False)
    assert values(td, ("next", "observation")) == EXPECTED["next", "observation"]
    assert env.rollout(10, actions=ACTIONS, break_when_all_done=False).batch_size == (3, 2)


def test_max_steps_and_set_truncated():
    env = counting_envs()
    td = env.rollout(2, actions=ACTIONS, break_when_all_done=True)
    assert values(td, ("next", "observation")) == [row[:2] for row in EXPECTED["next", "observation"]]
    with pytest.raises(RuntimeError, match="set_truncated was set to True but no truncated key could be found"):
        env.rollout(10, actions=ACTIONS, break_when_all_done=True, set_truncated=True)
    td = env.add_truncated_keys().rollout(10, actions=ACTIONS, break_when_all_done=True, set_truncated=True)
    # TorchRL marks the last step of every env truncated, a done env's too
    assert values(td, ("next", "truncated")) == [[False] * 4 + [True]] * 3
    assert values(td, ("next", "done")) == [[False, True, True, True, True], [False] * 4 + [True],
                                            [False, False, True, True, True]]


def test_unbatched_env_stops_at_its_end():
    td = CountingEnv(limit=3.0).rollout(10, actions=[torch.ones(1)] * 10, break_when_all_done=True)
    assert td["next", "observation"].flatten().tolist() == [1.0, 2.0, 3.0]


def test_both_flags_true_is_refused():
    with pytest.raises(TypeError, match="Cannot have both break_when_all_done and break_when_any_done True"):
        counting_envs().rollout(5, break_when_all_done=True, break_when_any_done=True)


def test_step_with_a_partial_step_entry():
    env = counting_envs()
    td = env.reset()
    td["action"] = torch.ones(3, 1)
    td["_step"] = torch.tensor([[True], [False], [True]])
    out = env.step(td)
    # as TorchRL: the skipped env's "next" entries are its root's (zero reward), "_step" stays in the input
    assert values(out, ("next", "observation")) == [1.0, 0.0, 1.0]
    assert values(out, ("next", "reward")) == [1.0, 0.0, 1.0]
    assert values(out, ("next", "done")) == [True, False, False]
    assert values(out, "_step") == [True, False, True]
    assert [sub.steps for sub in env.envs] == [1, 0, 1]
    td = step_mdp(out)
    td["action"] = torch.ones(3, 1)
    td["_step"] = torch.zeros(3, 1, dtype=torch.bool)
    out = env.step(td)  # nothing stepped: the root's observations and flags, a zero reward
    assert values(out, ("next", "observation")) == [1.0, 0.0, 1.0]
    assert values(out, ("next", "reward")) == [0.0, 0.0, 0.0]
    assert values(out, ("next", "done")) == [False, False, False]
    assert [sub.steps for sub in env.envs] == [1, 0, 1]
    td = step_mdp(out)
    td["observation"] = torch.tensor([[7.0], [8.0], [9.0]])
    td["action"], td["_step"] = torch.ones(3, 1), torch.tensor([[False], [True], [False]])
    out = env.step(td)  # TorchRL's test_special.TestPartialSteps: the idle envs' "next" is their root
    assert values(out, ("next", "observation")) == [7.0, 1.0, 9.0]
    assert values(out, ("next", "reward")) == [0.0, 1.0, 0.0]


# TorchRL: SerialEnv(3, GymEnv("CartPole-v1", categorical_action_encoding=True) seeded 0, 1, 2).rollout(
# 60, actions=CARTPOLE_ACTIONS,
# break_when_all_done=True): the first two end at step 9, the third at step 19
CARTPOLE_ACTIONS = [torch.tensor([1, 1, 0 if i % 3 else 1]) for i in range(60)]
CARTPOLE_FIRST = [[0.031327024102211, 0.04127555713057518, 0.010663577355444431, 0.02294965647161007],
                  [-0.018816854804754257, -0.007667355239391327, 0.03277026116847992,
                   -0.009080085903406143],
                  [0.010010052472352982, 0.022856052964925766, -0.03120989352464676,
                   -0.044485338032245636]]
CARTPOLE_LAST = [[0.21530795097351074, 1.9964252710342407, -0.2521454989910126, -3.066340923309326],
                 [0.15512558817863464, 1.9453493356704712, -0.230529323220253, -3.0369465351104736],
                 [-0.17513403296470642, -1.1530542373657227, 0.22655922174453735, 1.8663709163665771]]


def seeded_cartpole(seed):
    def make():
        env = GymEnv("CartPole-v1", categorical_action_encoding=True)
        env.set_seed(seed)  # resets with the seed (TorchRL's): the rollout starts from the second reset
        return env
    return make


def cartpole_serial():
    return SerialEnv(3, [seeded_cartpole(seed) for seed in (0, 1, 2)])


def cartpole_vector():  # gymnasium cannot step some envs of a vector env: reap resets the others
    env = GymEnv("CartPole-v1", num_envs=3, categorical_action_encoding=True)
    env.set_seed(0)
    return env


def cartpole_transformed():  # a TransformedEnv of a vector env goes through the same path
    return TransformedEnv(cartpole_vector(), StepCounter())


@pytest.mark.parametrize("make", [cartpole_serial, cartpole_vector, cartpole_transformed])
def test_cartpole_matches_torchrl(make):
    with make() as env:
        td = env.rollout(60, actions=CARTPOLE_ACTIONS, break_when_all_done=True)
    assert td.batch_size == (3, 20)
    done = td["next", "done"].squeeze(-1)
    assert done.int().argmax(-1).tolist() == [9, 9, 19]
    assert td["observation"][:, 0].tolist() == CARTPOLE_FIRST
    assert td["next", "observation"][:, -1].tolist() == CARTPOLE_LAST
    assert td["action"].tolist() == [[1] * 20, [1] * 20, [1, 0, 0] * 6 + [1, 0]]
    for i, end in enumerate((9, 9, 19)):  # after its end, an env's every entry is its last step's
        after = td[i, end:]
        assert (after == td[i, end:end + 1].expand(after.batch_size)).all()
