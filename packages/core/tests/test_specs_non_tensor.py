"""``NonTensor`` (TorchRL's spec of a non-tensor entry), side by side with TorchRL's where it is
installed."""

import pytest
import torch
from tensordict import NonTensorData, NonTensorStack

from reap.specs import Composite, NonTensor


def test_values_are_the_example_data_in_the_specs_shape():
    spec = NonTensor(shape=(), example_data="hi")
    assert spec.dtype is None and spec.zero().data == "hi" and spec.rand().data == "hi"
    assert spec.zero((2,)).batch_size == (2,) and spec.expand(3).shape == (3,)
    assert NonTensor().shape == (1,)  # TorchRL's default
    assert spec.is_in(NonTensorData("other")) and spec.is_in("a plain object")
    assert spec.expand(2).is_in(NonTensorStack(NonTensorData("a"), NonTensorData("b")))
    assert not spec.is_in(torch.zeros(2))
    assert spec == NonTensor(shape=(), example_data="hi") != NonTensor(shape=(), example_data="ho")
    assert spec.clone() == spec and spec.unsqueeze(0).shape == (1,) and spec.expand(4)[1:3].shape == (2,)
    assert Composite(text=spec, shape=()).zero()["text"] == "hi"
    with pytest.raises(TypeError, match=r"NonTensor got unexpected keyword arguments \['low'\]"):
        NonTensor(low=0)


def test_as_torchrls():
    torchrl_data = pytest.importorskip("torchrl.data")
    ours = NonTensor(shape=(2,), example_data="x")
    theirs = torchrl_data.NonTensor(shape=(2,), example_data="x")
    assert ours == theirs and ours.to_torchrl() == theirs
    for method in ("zero", "rand", "one"):
        a, b = getattr(ours, method)(), getattr(theirs, method)()
        assert (type(a), a.batch_size, a.data) == (type(b), b.batch_size, b.data)
    assert ours.expand(3, 2).shape == theirs.expand(3, 2).shape


@pytest.mark.parametrize("shape,kwargs,lead", [
    ((), {}, ()), ((1,), {}, (2,)), ((3, 4), {}, ()), ((3, 4), {}, (2,)), ((3, 4), {"feature_dims": 1}, ()),
    ((3, 4), {"batched": True}, ()),
])
def test_feature_dims_and_stacks_as_torchrl_s(shape, kwargs, lead):
    # the dims before the last feature_dims are stacked copies of the example (TorchRL's layout)
    ours = NonTensor(shape=shape, example_data="x", **kwargs)
    expected = (len(shape) if not kwargs else kwargs.get("feature_dims", 0))
    assert ours.feature_dims == expected and ours.expand(5, *shape).feature_dims == expected
    value = ours.zero(lead)
    stacked = bool((*lead, *shape[: len(shape) - expected]) if expected else ())
    assert type(value) is (NonTensorStack if stacked else NonTensorData)
    leaves = value.tolist()
    for _ in range(len(lead) + len(shape)):
        leaves = [x for row in leaves for x in row] if isinstance(leaves, list) else leaves
    assert value.batch_size == (*lead, *shape) and leaves in (["x"] * max(1, torch.Size((*lead, *shape)).numel()), "x")
    torchrl_data = pytest.importorskip("torchrl.data")
    theirs = torchrl_data.NonTensor(shape=shape, example_data="x", **kwargs)
    other = theirs.zero(lead)
    assert (type(value), value.batch_size) == (type(other), other.batch_size) and ours.feature_dims == theirs.feature_dims
    with pytest.raises(ValueError, match="give batched or feature_dims, not both"):
        NonTensor(shape=shape, batched=True, feature_dims=1)
