"""Batches as NumPy arrays: what the actors send and the driver rebuilds, exactly."""

import pickle

import numpy as np
import torch
from tensordict import TensorDict

from reap_ray.batches import Filled, pack_batch, stack_batches, unpack_batch


def _batch(worker: int, version: int, traj_ids) -> TensorDict:
    return TensorDict({
        "observation": torch.arange(6.0).reshape(2, 3) + worker,
        ("collector", "worker_id"): torch.full((2, 3), worker),
        ("collector", "policy_version"): torch.full((2, 3), version),
        ("collector", "traj_ids"): torch.tensor(traj_ids),
        ("next", "done"): torch.zeros(2, 3, 1, dtype=torch.bool),
    }, batch_size=[2, 3])


def test_constant_collector_columns_travel_as_one_value_and_come_back_exactly():
    parts = [_batch(0, 3, [[0, 0, 0], [1, 1, 2]]), _batch(1, 4, [[5, 5, 5], [5, 5, 5]])]
    packed = [pickle.loads(pickle.dumps(pack_batch(p), protocol=5)) for p in parts]
    assert packed[0].arrays["collector", "worker_id"] == Filled(0, (2, 3), np.dtype("int64"))
    assert packed[0].arrays["collector", "policy_version"] == Filled(3, (2, 3), np.dtype("int64"))
    assert isinstance(packed[0].arrays["collector", "traj_ids"], np.ndarray)  # not one value
    assert type(packed[1].arrays["collector", "traj_ids"]) is Filled  # one value: any collector column
    assert type(packed[0].arrays["observation"]) is np.ndarray  # only ("collector", ...) columns
    for got, want in ((stack_batches(packed), torch.stack(parts, 0)), (unpack_batch(packed[1]), parts[1])):
        assert got.batch_size == want.batch_size
        for key, value in want.items(include_nested=True, leaves_only=True):
            assert got[key].dtype == value.dtype and torch.equal(got[key], value), key
    # the rebuilt batch owns writable memory
    stack_batches(packed)["collector", "worker_id"].add_(1)
    unpack_batch(packed[0])["collector", "policy_version"].add_(1)
