"""reap's specs on their own (no TorchRL needed): TorchRL's classes, defaults, errors, nested
Composites, masks, stacks and locks, with the values TorchRL 0.14.1 gives recorded here."""

import pickle

import pytest
import torch
from tensordict import LazyStackedTensorDict

from reap.specs import (
    Binary,
    Bounded,
    Categorical,
    Composite,
    MultiCategorical,
    MultiOneHot,
    OneHot,
    Stacked,
    StackedComposite,
    Unbounded,
    UnboundedDiscrete,
)


def test_classes_and_defaults_are_torchrl_s():
    assert type(Unbounded()).__name__ == "UnboundedContinuous" and Unbounded().shape == (1,)
    assert type(Unbounded(dtype=torch.int64)).__name__ == "UnboundedDiscrete"
    assert type(Bounded(0, 9, shape=(2,), dtype=torch.int64)).__name__ == "BoundedDiscrete"
    assert type(UnboundedDiscrete(dtype=torch.float32)).__name__ == "UnboundedContinuous"
    assert (Binary(3).dtype, Binary(3).n, OneHot(3).dtype, Categorical(3).dtype) == (
        torch.int8, 2, torch.bool, torch.int64)
    spec = Bounded(0, 1, (2,), "cpu", torch.float16)  # TorchRL's positional order: shape, device, dtype
    assert (spec.shape, spec.device, spec.dtype) == (torch.Size([2]), torch.device("cpu"), torch.float16)
    assert Composite(a=Unbounded()).dtype == torch.float32 and Composite().device is None
    with pytest.raises(TypeError):
        hash(Categorical(2))


def test_draws_are_torchrl_s_under_a_seed():
    # recorded from TorchRL 0.14.1 under torch.manual_seed(0)
    cases = [(Categorical(5).rand, (4,), [4, 4, 3, 0]),
             (Bounded(-5, 5, shape=(4,), dtype=torch.int64).rand, (), [5, 2, 0, 5]),
             (MultiCategorical([2, 5]).rand, (2,), [[0, 3], [1, 0]]),
             (Binary(3).rand, (), [0, 1, 1])]
    for draw, shape, expected in cases:
        torch.manual_seed(0)
        assert draw(shape).tolist() == expected
    torch.manual_seed(0)
    assert OneHot(3).rand((2,)).long().tolist() == [[0, 0, 1], [1, 0, 0]]
    torch.manual_seed(0)
    assert torch.allclose(Bounded(-1.0, 1.0, shape=(3,)).rand(), torch.tensor([-0.0074868, 0.5364436, -0.8230451]))


def test_values_projections_and_enumerations():
    assert Categorical(10).project(torch.tensor([-100, -1, 0, 1, 9, 10, 100])).tolist() == [0, 0, 0, 1, 9, 9, 9]
    assert Categorical(3, shape=(2,)).enumerate().tolist() == [[0, 0], [1, 1], [2, 2]]
    assert int(MultiOneHot([2, 3]).cardinality()) == 6 and Composite(a=Categorical(2), b=OneHot(3)).cardinality() == 6
    one_hot = OneHot(3)
    assert one_hot.encode(2).tolist() == [False, False, True] and one_hot.to_numpy(one_hot.encode(1)) == 1
    with pytest.raises(AssertionError, match="Value must be less than action space."):
        one_hot.encode(3)
    with pytest.raises(RuntimeError, match=r"Shape mismatch: the value has shape torch.Size\(\[4\]\)"):
        Unbounded(shape=(3,)).encode([1.0, 2.0, 3.0, 4.0])
    assert not Bounded(-1.0, 1.0, shape=(2,)).is_in(torch.tensor([0.0, 2.0]))
    assert Bounded(-1.0, 1.0, shape=(2,)).project(torch.tensor([0.0, 2.0])).tolist() == [0.0, 1.0]


def test_bad_arguments_are_refused_with_torchrl_s_messages():
    with pytest.raises(RuntimeError, match="Bounded requires the shape to be explicitly"):
        Bounded(0.0, 1.0)
    with pytest.raises(ValueError, match=r"Bounded: low must not exceed high .* swap them"):
        Bounded(1.0, 0.0, shape=(1,))
    with pytest.raises(TypeError, match="'maximum' has been removed. Please use 'high' instead."):
        Bounded(maximum=1.0)
    with pytest.raises(ValueError, match="The last value of the shape must match n"):
        OneHot(3, shape=(2,))
    with pytest.raises(ValueError, match="The last value of the shape must match 'n'"):
        Binary(n=3, shape=(2,))
    with pytest.raises(ValueError, match="use_register=True is not supported"):
        OneHot(3, use_register=True)
    with pytest.raises(ValueError, match=r"The last 1 of the expanded shape torch.Size\(\[4, 2\]\) must match"):
        Unbounded(shape=(3,)).expand(4, 2)
    with pytest.raises(ValueError, match="Final dimension of .* must remain unchanged"):
        OneHot(3).unsqueeze(-1)
    with pytest.raises(ValueError, match="Cannot index_select along the last dimension of OneHot spec"):
        torch.index_select(OneHot(3, shape=(2, 3)), -1, torch.tensor([0]))
    with pytest.raises(RuntimeError, match="Cannot expand mask to the desired shape."):
        Categorical(3, shape=(2,), mask=torch.ones(3, 3, dtype=torch.bool))


def test_masks_limit_draws_membership_and_projection():
    spec = OneHot(4, mask=torch.tensor([True, False, True, False]))
    torch.manual_seed(0)
    assert spec.rand((5,)).long().argmax(-1).tolist() == [2, 2, 2, 0, 0]  # TorchRL's draws
    assert not spec.is_in(torch.tensor([False, True, False, False]))
    assert spec.project(torch.tensor([False, True, False, False]))[[1, 3]].tolist() == [False, False]
    categorical = Categorical(3, shape=(2,), mask=torch.tensor([[True, False, False], [False, False, True]]))
    assert categorical.rand().tolist() == [0, 2] and categorical.is_in(torch.tensor([0, 2]))
    assert categorical.expand(4, 2).rand().tolist() == [[0, 2]] * 4  # the mask follows the shape
    categorical.update_mask(None)
    assert categorical.mask is None and categorical.is_in(torch.tensor([1, 1]))


def test_indexing_and_shape_operations():
    spec = Bounded(-torch.ones(5, 3), torch.arange(15.0).view(5, 3))
    assert spec[1].shape == (3,) and spec[1].high.tolist() == [3.0, 4.0, 5.0]
    assert spec[[0, 1]].shape == (2, 3) and spec[[[0, 1]]].shape == (1, 2, 3) and spec[None].shape == (1, 5, 3)
    assert spec[..., :2].shape == (5, 2) and spec[torch.tensor([4, 0])].high[0].tolist() == [12.0, 13.0, 14.0]
    with pytest.raises(IndexError):
        spec[5]
    one_hot = OneHot(4, shape=(3, 4))
    assert one_hot[0].shape == (4,) and one_hot[..., :2].shape == (2, 4)
    assert one_hot.unsqueeze(0).shape == (1, 3, 4) and one_hot.unsqueeze(0).squeeze(0) == one_hot
    assert [s.shape for s in one_hot.unbind(0)] == [torch.Size([4])] * 3
    assert torch.index_select(spec, 0, torch.tensor([0, 4])).high[1].tolist() == [12.0, 13.0, 14.0]
    assert Unbounded(shape=(2, 3)).reshape(6).shape == (6,) and Unbounded(shape=(6,)).unflatten(0, (2, 3)).shape == (
        2, 3)
    assert Unbounded(shape=(2,)).to(torch.int32) == UnboundedDiscrete(shape=(2,), dtype=torch.int32)


def test_composite_nested_keys():
    spec = Composite(observation=Unbounded(shape=(2, 3)), shape=(2,))
    spec["agents", "action"] = Categorical(4, shape=(2,))
    assert isinstance(spec["agents"], Composite) and spec["agents"].shape == (2,)
    assert spec["agents", "action"] is spec["agents"]["action"] is spec[("agents", ("action",))]
    c = Composite(a=Composite(b=Unbounded(shape=(1,))), c=Unbounded(shape=(1,)))
    assert list(c.keys(True)) == [("a", "b"), "a", "c"]  # TorchRL's order: nested entries first
    assert list(c.keys(True, True)) == [("a", "b"), "c"] and list(c.keys(leaves_only=True)) == ["c"]
    assert ("a", ("b",)) in c.keys(True) and ("a",) in c.keys() and ("a", "b") not in c.keys()
    assert ("a", "b") not in c and "a" in c  # TorchRL's Composite: top-level keys only
    c.update(Composite(a=Composite(d=Unbounded(shape=(2,))), e=None))
    assert sorted(c.keys(True, True), key=str) == [("a", "b"), ("a", "d"), "c", "e"]
    del c["a", "d"]
    assert c.pop(("a", "b")).shape == (1,) and c["a"].is_empty() and c.is_empty(recurse=False) is False
    sample = spec.rand((3,))
    assert sample.batch_size == (3, 2) and sample["agents", "action"].shape == (3, 2)
    assert spec.is_in(spec.zero()) and spec.expand(4, 2)["agents", "action"].shape == (4, 2)
    assert spec[0]["observation"].shape == (3,) and [s.shape for s in spec.unbind(0)] == [torch.Size([])] * 2
    assert Composite({("x", "y"): Unbounded(shape=(1,))})["x", "y"].shape == (1,)


def test_composite_refuses_what_torchrl_refuses():
    spec = Composite(a=Unbounded(shape=(2, 1)), shape=(2,))
    with pytest.raises(AttributeError, match=r"Composite\[shape\] cannot be set"):
        spec["shape"] = Unbounded()
    with pytest.raises(ValueError, match=r"The shapes of the spec UnboundedContinuous and the Composite mismatch: "
                                         r"the first 1 dimensions should match"):
        spec["b"] = Unbounded(shape=(3, 1))
    with pytest.raises(KeyError):
        spec["missing"]
    with pytest.raises(KeyError, match="The Composite instance with keys"):
        spec.encode({"c": 0})
    with pytest.raises(TypeError, match="Composite entries are specs"):
        spec["b"] = 3


def test_locks_follow_the_graph():
    level2 = Composite()
    level1 = Composite(level2=level2)
    root = Composite(level1=level1)
    root.lock_()
    with pytest.raises(RuntimeError, match="Cannot modify a locked Composite."):
        level1["new"] = Unbounded()
    with pytest.raises(RuntimeError, match="Cannot unlock a Composite that is part of a locked graph"):
        level2.unlock_()
    assert level2.is_locked
    root.unlock_()
    level1["new"] = Unbounded()
    assert not level2.locked
    locked = pickle.loads(pickle.dumps(root.lock_()))
    assert locked.is_locked and locked["level1"].is_locked


def test_stacks_of_equal_and_different_specs():
    same = torch.stack([Bounded(-1.0, 1.0, shape=(3,))] * 2)
    assert type(same).__name__ == "BoundedContinuous" and same.shape == (2, 3)
    different = torch.stack([Unbounded(shape=(2,)), Unbounded(shape=(3,))])
    assert isinstance(different, Stacked) and different.shape == (2, -1) and different[1].shape == (3,)
    with pytest.raises(RuntimeError, match="Found more than one type of specs"):
        torch.stack([Unbounded(shape=(2,)), Categorical(2, shape=(2,))])
    agents = torch.stack([Composite(obs=Unbounded(shape=(2,))), Composite(obs=Unbounded(shape=(3,)), id=Unbounded())])
    assert isinstance(agents, StackedComposite) and list(agents.keys()) == ["obs"] and agents[1]["id"].shape == (1,)
    sample = agents.rand()
    assert isinstance(sample, LazyStackedTensorDict) and agents.is_in(sample)
    assert [td["obs"].shape for td in sample.tensordicts] == [torch.Size([2]), torch.Size([3])]
    del agents["id"]
    assert "id" not in agents[1].keys()


def test_negative_step_slices_index_like_python_ranges():
    # torch refuses negative steps; a spec takes them (TorchRL's shapes), its tensors reversed to match
    low = torch.arange(15.0).view(5, 3)
    spec = Bounded(low=low, high=low + 1, shape=(5, 3))
    assert spec[10:1:-1].shape == (3, 3) and torch.equal(spec[10:1:-1].low, low[2:5].flip(0))
    assert torch.equal(spec[::-1, 0].low, low[:, 0].flip(0)) and spec[1, ::-2].shape == (2,)
    assert torch.equal(spec[None, ::-2].high, (low + 1)[::2].flip(0)[None])
    assert Composite(a=spec, shape=(5,))[::-1]["a"] == spec[::-1] and spec[3:1:1].shape == (0, 3)
    with pytest.raises(IndexError, match="a negative-step slice of a spec goes with ints, slices, None and"):
        spec[::-1, [0, 1]]


def test_composite_is_in_of_data_without_an_entry_is_a_key_error():
    spec = Composite(a=Unbounded(3), b=Unbounded(2))
    data = spec.rand().exclude("b")
    with pytest.raises(KeyError, match='key "b" not found in TensorDict with keys'):
        spec.is_in(data)
    with pytest.raises(KeyError, match="key \"b\" not found"):
        spec.project(data)
