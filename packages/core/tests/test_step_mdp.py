"""``step_mdp`` with TorchRL's keyword arguments, on nested keys and lazy stacks, against TorchRL's
function on the same inputs; and the plain cases without TorchRL, values recorded from it."""

import itertools

import pytest
import torch
from tensordict import LazyStackedTensorDict, TensorDict, is_tensor_collection

from reap.envs.utils import step_mdp


def nested_step() -> TensorDict:
    """A step of an env with a root and an agents' group, each with its action, reward and flags."""
    def group(offset):
        return {"obs": torch.full((2, 1), offset), "action": torch.full((2, 1), offset + 1),
                "done": torch.zeros(2, 1, dtype=torch.bool), "other": torch.full((2, 1), offset + 2)}

    root = {**group(0.0), "agents": group(10.0), "info": {"extra": torch.ones(2, 3)}}
    nxt = {"obs": torch.full((2, 1), 5.0), "reward": torch.ones(2, 1), "done": torch.ones(2, 1, dtype=torch.bool),
           "agents": {"obs": torch.full((2, 1), 15.0), "reward": torch.ones(2, 1) * 2,
                      "done": torch.ones(2, 1, dtype=torch.bool)}}
    return TensorDict({**root, "next": nxt}, batch_size=[2])


def lazy_step() -> LazyStackedTensorDict:
    """Two agents whose observations differ in shape, stacked lazily."""
    agents = [TensorDict({"obs": torch.zeros(n), "action": torch.ones(1),
                          "next": {"obs": torch.ones(n), "reward": torch.ones(1)}}) for n in (2, 3)]
    return LazyStackedTensorDict.lazy_stack(agents, 0)


def locked_lazy_step() -> LazyStackedTensorDict:
    """Three groups of four envs, stacked along dim 1, each group's entries of its own width;
    locked, as TorchRL's tests hand it over."""
    groups = []
    for width in (1, 2, 3):
        def group(value, keys, width=width):
            return TensorDict({k: torch.full((4, width), value) for k in keys}, [4])
        groups.append(TensorDict({"data": group(0.0, ("reward", "done", "action", "state", "other")),
                                  "next": {"data": group(1.0, ("reward", "done", "state"))}}, [4]))
    return LazyStackedTensorDict.lazy_stack(groups, dim=1).lock_()


def nested_lazy_step() -> TensorDict:
    """A root with a group of two agents stacked lazily below it, their entries of different widths
    (TorchRL's HeterogeneousCountingEnv), locked."""
    def agents(value, keys):
        return LazyStackedTensorDict.lazy_stack(
            [TensorDict({k: torch.full((n,), value) for k in keys}) for n in (1, 2)], 0)

    return TensorDict({"obs": torch.zeros(1), "agents": agents(0.0, ("obs", "action", "done")),
                       "next": {"obs": torch.ones(1), "agents": agents(1.0, ("obs", "reward", "done"))}}).lock_()


KEYWORDS = [dict(zip(("keep_other", "exclude_reward", "exclude_done", "exclude_action"), flags))
            for flags in itertools.product([True, False], repeat=4)]
ROOT_AND_AGENTS = (nested_step, lazy_step, lambda: nested_step().lock_())
#: keys, and the data they name (TorchRL copies a missing nested action key's leaf from the root)
KEY_SETS = [({}, ROOT_AND_AGENTS),
            ({"reward_keys": ("agents", "reward"), "done_keys": ["done", ("agents", "done")],
              "action_keys": [("agents", "action"), "action"]}, ROOT_AND_AGENTS),
            ({"reward_keys": ("data", "reward"), "done_keys": ("data", "done"), "action_keys": ("data", "action")},
             (locked_lazy_step,)),
            ({"reward_keys": ("agents", "reward"), "done_keys": ("agents", "done"), "action_keys": ("agents", "action")},
             (nested_lazy_step,))]


def leaves(td) -> dict:
    """The values of ``td`` by key, level by level; a lazy stack (at any level) member by member."""
    if isinstance(td, LazyStackedTensorDict):
        return {i: leaves(t) for i, t in enumerate(td.tensordicts)}
    out = {}
    for key in td.keys():
        value = td.get(key)
        if value is None:  # TorchRL writes None for an action key the data lacks (keep_other=False)
            continue
        out[key] = leaves(value) if is_tensor_collection(value) else value.tolist()
    return out


@pytest.mark.parametrize("keys,data", KEY_SETS, ids=["default-keys", "nested-keys", "data-keys", "nested-lazy"])
def test_step_mdp_matches_torchrl_on_every_keyword_combination(keys, data):
    torchrl_step_mdp = pytest.importorskip("torchrl.envs.utils").step_mdp
    for kwargs in KEYWORDS:
        for make in data:
            ours, theirs = step_mdp(make(), **kwargs, **keys), torchrl_step_mdp(make(), **kwargs, **keys)
            assert type(ours) is type(theirs) and ours.batch_size == theirs.batch_size
            assert leaves(ours) == leaves(theirs), (make.__name__, kwargs)


def test_step_mdp_into_a_given_tensordict_matches_torchrl():
    torchrl_step_mdp = pytest.importorskip("torchrl.envs.utils").step_mdp
    results = []
    for fn in (step_mdp, torchrl_step_mdp):
        given = TensorDict(kept=torch.zeros(2), batch_size=[2])
        out = fn(nested_step(), next_tensordict=given, exclude_done=True)
        assert out is given
        results.append(leaves(out))
    assert results[0] == results[1]


def test_step_mdp_defaults_and_nested_exclusions():
    # values recorded from TorchRL 0.14.1's step_mdp on nested_step()
    assert sorted(step_mdp(nested_step()).keys(True, True), key=str) == [
        ("agents", "action"), ("agents", "done"), ("agents", "obs"), ("agents", "other"), ("agents", "reward"),
        ("info", "extra"), "done", "obs", "other"]
    out = step_mdp(nested_step(), keep_other=False, exclude_action=False, action_keys=("agents", "action"),
                   reward_keys=("agents", "reward"), exclude_done=True, done_keys=["done", ("agents", "done")])
    assert sorted(out.keys(True, True), key=str) == [("agents", "action"), ("agents", "obs"), "obs", "reward"]
    assert out["agents", "obs"].flatten().tolist() == [15.0, 15.0] and out["agents", "action"].flatten().tolist() == [
        11.0, 11.0]
    lazy = step_mdp(lazy_step())
    assert isinstance(lazy, LazyStackedTensorDict) and [t["obs"].tolist() for t in lazy.tensordicts] == [
        [1.0, 1.0], [1.0, 1.0, 1.0]]


def test_step_mdp_keeps_a_nested_lazy_stack_member_by_member():
    # entries of different widths below the root cannot be stacked: each agent is stepped alone
    keys = {"reward_keys": ("agents", "reward"), "done_keys": ("agents", "done"), "action_keys": ("agents", "action")}
    out = step_mdp(nested_lazy_step(), **keys)
    assert isinstance(out["agents"], LazyStackedTensorDict)
    assert leaves(out) == {"obs": [1.0], "agents": {0: {"obs": [1.0], "done": [1.0]},
                                                   1: {"obs": [1.0, 1.0], "done": [1.0, 1.0]}}}
    out = step_mdp(nested_lazy_step(), keep_other=False, exclude_action=False, exclude_done=True, **keys)
    assert leaves(out) == {"obs": [1.0], "agents": {0: {"obs": [1.0], "action": [0.0]},
                                                   1: {"obs": [1.0, 1.0], "action": [0.0, 0.0]}}}
