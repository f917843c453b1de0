"""``rollout(set_truncated=True)`` and ``rollout(auto_reset=False)`` from a done tensordict,
against TorchRL 0.14.1.

The constants were recorded from TorchRL runs of ``SerialEnv(3, ...)`` of envs with the dynamics
of ``reap_testing.CountingEnv`` (limits 1, 6 and 3; TorchRL's needed ``add_truncated_keys()``),
driven by the same actions.
"""

import pytest
import torch

from reap import SerialEnv
from reap.envs.utils import step_mdp
from reap_testing import CountingEnv

LIMITS = (1.0, 6.0, 3.0)
ACTIONS = [torch.full((3, 1), 0.5 * (i + 1)) for i in range(10)]


def counting_envs() -> SerialEnv:
    return SerialEnv(3, [lambda limit=limit: CountingEnv(limit) for limit in LIMITS])


def values(td, key):
    return td[key].squeeze(-1).tolist()


def test_set_truncated_marks_the_last_step_of_every_env_when_the_rollout_breaks_early():
    td = counting_envs().add_truncated_keys().rollout(10, actions=ACTIONS, set_truncated=True)
    # TorchRL: the first env is done after 2 steps; the rollout stops there and the last step is
    # truncated (and done) for all three envs, the terminated env included
    assert values(td, ("next", "observation")) == [[0.5, 1.5]] * 3
    assert values(td, ("next", "terminated")) == [[False, True], [False, False], [False, False]]
    assert values(td, ("next", "truncated")) == [[False, True]] * 3
    assert values(td, ("next", "done")) == [[False, True]] * 3
    assert values(td, "done") == [[False, False]] * 3


@pytest.mark.parametrize("kwargs", [{}, {"break_when_any_done": False}, {"break_when_all_done": True}])
def test_set_truncated_leaves_earlier_steps_alone(kwargs):
    td = counting_envs().add_truncated_keys().rollout(4, actions=ACTIONS, set_truncated=True, **kwargs)
    truncated = td["next", "truncated"].squeeze(-1)
    assert truncated[:, -1].all() and td["next", "done"][:, -1].all()
    assert not truncated[:, :-1].any()


def test_auto_reset_false_resets_the_done_envs_of_the_given_tensordict_first():
    env = counting_envs()
    first = env.rollout(2, actions=ACTIONS)  # the first env is done after its second step
    start = step_mdp(first[:, -1])  # keeps the done flags, as TorchRL's step_mdp does
    assert values(start, "done") == [True, False, False]
    td = env.rollout(3, actions=ACTIONS, auto_reset=False, tensordict=start, break_when_any_done=False)
    # TorchRL (maybe_reset): the done env starts from a reset (0.0), the others go on from 1.5
    assert values(td, "observation") == [[0.0, 0.5, 0.0], [1.5, 2.0, 3.0], [1.5, 2.0, 0.0]]
    assert values(td, ("next", "observation")) == [[0.5, 1.5, 1.5], [2.0, 3.0, 4.5], [2.0, 3.0, 1.5]]
    assert values(td, "done") == [[False] * 3] * 3
    assert values(td, ("next", "done")) == [[False, True, True], [False, False, False], [False, True, False]]
    # TorchRL resets the done envs of the caller's tensordict in place (maybe_reset)
    assert values(start, "done") == [False, False, False] and values(start, "observation") == [0.0, 1.5, 1.5]


def test_auto_reset_false_keeps_a_tensordict_with_no_done_env_as_it_is():
    env = counting_envs()
    start = step_mdp(env.rollout(1, actions=ACTIONS)[:, -1])
    td = env.rollout(2, actions=ACTIONS, auto_reset=False, tensordict=start, break_when_any_done=False)
    assert values(td, "observation") == [[0.5, 0.0], [0.5, 1.0], [0.5, 1.0]]  # the first env is done at 1.0


@pytest.mark.parametrize("kwargs", [{"break_when_any_done": False}, {"break_when_all_done": True}])
def test_root_entries_of_the_given_tensordict_carry_over_to_every_step(kwargs):
    env = counting_envs()
    start = step_mdp(env.rollout(1, actions=ACTIONS)[:, -1])
    start["hidden"] = torch.arange(3.0).unsqueeze(-1)  # e.g. a caller's recurrent state
    td = env.rollout(3, actions=ACTIONS, auto_reset=False, tensordict=start, **kwargs)
    # TorchRL (step_mdp with keep_other=True) keeps it through steps and resets
    assert values(td, "hidden") == [[0.0] * td.shape[1], [1.0] * td.shape[1], [2.0] * td.shape[1]]
    assert "action" in td.keys() and "reward" not in td.keys()
