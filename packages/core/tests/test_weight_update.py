"""Weights must match the policy exactly: keys, shapes (no broadcasting), dtypes (exact casts only)."""

import pytest
import torch
from tensordict import TensorDict
from tensordict.nn import TensorDictModule

from reap.weight_update import (
    VanillaWeightUpdater,
    as_weights,
    copy_weights,
    exact_cast,
    match_weights,
)


def linear_policy():
    module = torch.nn.Linear(3, 1)
    with torch.no_grad():
        module.weight.fill_(0.25)
        module.bias.fill_(-1.0)
    return TensorDictModule(module, in_keys=["observation"], out_keys=["action"])


def test_broadcastable_shape_is_refused_naming_the_key():
    policy = linear_policy()
    before = as_weights(policy).clone()
    with pytest.raises(ValueError, match=r"'module\.weight' has shape \(3,\) but the policy's has shape \(1, 3\)"):
        copy_weights(as_weights(policy), TensorDict({"module": {"weight": torch.ones(3), "bias": torch.zeros(1)}}))
    with pytest.raises(ValueError, match=r"'module\.bias' has shape \(\) but the policy's has shape \(1,\)"):
        copy_weights(as_weights(policy), as_weights({"weight": torch.ones(1, 3), "bias": torch.tensor(2.0)}))
    assert (as_weights(policy) == before).all()  # nothing was written


def test_exact_dtype_casts_are_accepted_with_the_policys_dtype():
    policy = linear_policy()
    weights = as_weights({"module.weight": torch.tensor([[1, -2, 3]]), "module.bias": torch.tensor([True])})
    matched = match_weights(as_weights(policy), weights)
    assert matched["module", "weight"].dtype == torch.float32
    assert matched["module", "bias"].dtype == torch.float32
    assert weights["module", "weight"].dtype == torch.int64  # the caller's weights are left as they were
    copy_weights(as_weights(policy), weights)
    assert policy.module.weight.tolist() == [[1.0, -2.0, 3.0]]
    assert policy.module.bias.tolist() == [1.0]
    # NaN and inf survive a float cast as themselves
    nan_inf = torch.tensor([[float("nan"), float("inf"), 0.5]], dtype=torch.float64)
    copy_weights(as_weights(policy), {"module.weight": nan_inf, "module.bias": torch.zeros(1, dtype=torch.float64)})
    assert policy.module.weight[0, 0].isnan() and policy.module.weight[0, 1] == float("inf")


@pytest.mark.parametrize(("value", "src", "dest", "shown"), [
    (0.1, torch.float64, torch.float32, "0.1 would become 0.10000000149011612"),
    (2**24 + 1, torch.int64, torch.float32, "16777217 would become 16777216.0"),
    (0.5, torch.float32, torch.int64, "0.5 would become 0"),
    (200, torch.uint8, torch.int8, "200 would become -56"),
    (float("nan"), torch.float32, torch.int32, "nan would become"),
    (70000.0, torch.float32, torch.float16, "70000.0 would become inf"),
    (2.0, torch.float32, torch.bool, "2.0 would become True"),
])
def test_lossy_casts_are_refused_naming_the_key(value, src, dest, shown):
    policy = TensorDict({"net": {"w": torch.zeros(2, dtype=dest)}})
    weights = TensorDict({"net": {"w": torch.tensor([1, value], dtype=src)}})
    with pytest.raises(ValueError, match=rf"'net\.w' are {src} and cannot be cast exactly to the policy's {dest} \({shown}"):
        copy_weights(policy, weights)
    assert (policy["net", "w"] == 0).all()


def test_exact_cast_keeps_values_and_refuses_lost_imaginary_parts():
    assert exact_cast(torch.tensor([3, -4]), torch.float16).tolist() == [3.0, -4.0]
    assert exact_cast(torch.tensor([1 + 0j]), torch.float32).tolist() == [1.0]
    with pytest.raises(ValueError, match="cannot be cast exactly"):
        exact_cast(torch.tensor([1 + 1j]), torch.float32)


def test_inner_module_weights_and_key_errors():
    policy = linear_policy()
    copy_weights(as_weights(policy), {"weight": torch.full((1, 3), 2.0), "bias": torch.zeros(1)})
    assert policy.module.weight.tolist() == [[2.0, 2.0, 2.0]]
    with pytest.raises(ValueError, match=r"missing \['module\.bias'\], unexpected \['module\.b'\]"):
        copy_weights(as_weights(policy), {"module.weight": torch.ones(1, 3), "module.b": torch.ones(1)})


def test_vanilla_updater_refuses_mismatched_weights():
    policy = linear_policy()
    updater = VanillaWeightUpdater(policy_weights=policy)
    with pytest.raises(ValueError, match=r"'module\.weight' has shape \(1, 1\)"):
        updater.push_weights({"module.weight": torch.ones(1, 1), "module.bias": torch.zeros(1)})
    updater.push_weights({"module.weight": torch.tensor([[1, 2, 3]]), "module.bias": torch.tensor([4])})
    assert policy.module.weight.dtype == torch.float32
    assert policy(TensorDict({"observation": torch.ones(3)}))["action"].item() == 10.0
