"""RayReplayBuffer: the same answers as the reap-replay buffer it wraps, from a Ray actor."""

import functools

import pytest
import torch
from tensordict import TensorDict

from reap_ray import RayReplayBuffer
from reap_replay import (
    LazyTensorStorage,
    ReplayBuffer,
    SamplerWithoutReplacement,
    TensorDictPrioritizedReplayBuffer,
)


def _data(start, n):
    return TensorDict({"x": torch.arange(start, start + n), "y": torch.arange(start, start + n).float()[:, None]}, [n])


def test_extend_add_sample_len_empty_match_a_local_buffer():
    local = ReplayBuffer(storage=LazyTensorStorage(50), sampler=SamplerWithoutReplacement(), batch_size=10)
    with RayReplayBuffer(storage=functools.partial(LazyTensorStorage, 50), sampler=SamplerWithoutReplacement,
                         batch_size=10) as rb:
        for buf in (local, rb):
            assert buf.extend(_data(0, 30)).tolist() == list(range(30))
            assert buf.add(_data(30, 1)[0]) == 30
        assert len(rb) == len(local) == 31
        seen = torch.cat([rb.sample()["x"] for _ in range(3)])
        assert len(set(seen.tolist())) == 30  # without replacement: distinct items
        state = rb.state_dict()
        assert state.keys() == local.state_dict().keys()
        rb.empty()
        assert len(rb) == 0


def test_prioritized_update_priority_and_alias():
    with RayReplayBuffer(storage=LazyTensorStorage(8), batch_size=4, alpha=1.0, beta=1.0,
                         replay_buffer_cls=TensorDictPrioritizedReplayBuffer) as rb:
        rb.extend(_data(0, 8))
        rb.update_priority(torch.arange(8), torch.tensor([0.0] * 7 + [1.0]))
        assert rb.sample()["x"].tolist() == [7, 7, 7, 7]
        rb.update_priorities(torch.arange(8), torch.tensor([1.0] + [0.0] * 7))
        assert rb.sample()["x"].tolist() == [0, 0, 0, 0]
        with pytest.raises(ValueError):
            rb.update_priority(torch.tensor([0]), torch.tensor([float("nan")]))


def test_dumps_loads_round_trip_and_use_after_shutdown(tmp_path):
    with pytest.raises(ValueError, match="call_timeout must be a positive number"):
        RayReplayBuffer(storage=LazyTensorStorage(4), call_timeout=0)
    rb = RayReplayBuffer(storage=LazyTensorStorage(20), sampler=SamplerWithoutReplacement, batch_size=12)
    rb.extend(_data(0, 12))
    rb.dumps(tmp_path / "ckpt")
    rb.empty()
    rb.extend(_data(100, 3))
    rb.loads(tmp_path / "ckpt")
    assert len(rb) == 12
    assert sorted(rb.sample()["x"].tolist()) == list(range(12))
    rb.shutdown()
    rb.shutdown()
    with pytest.raises(RuntimeError, match="shut down"):
        len(rb)


class _SlowToBuild(ReplayBuffer):
    def __init__(self, **kwargs):
        import time

        time.sleep(30)
        super().__init__(**kwargs)


def test_start_timeout_names_a_slow_start_and_takes_its_deprecated_name():
    with pytest.raises(ValueError, match="RayReplayBuffer: start_timeout must be a positive number"):
        RayReplayBuffer(storage=LazyTensorStorage(4), start_timeout=-1)
    with pytest.raises(TypeError, match="pass start_timeout or actor_start_timeout"):
        RayReplayBuffer(storage=LazyTensorStorage(4), start_timeout=5, actor_start_timeout=5)
    # the cluster has room, the actor's constructor is slow: the error says so, not "resources held"
    with pytest.raises(Exception, match=r"RayReplayBuffer: actor 0 was not ready after 2 s: .* free: the cluster "
                                        r"has room for it, so its worker process was slow to start"), \
            pytest.warns(DeprecationWarning, match="actor_start_timeout is deprecated; pass start_timeout=2"):
        RayReplayBuffer(storage=LazyTensorStorage(4), replay_buffer_cls=_SlowToBuild, actor_start_timeout=2,
                        remote_config={"num_cpus": 0.5, "memory": 2**27})
