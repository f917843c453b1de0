"""TorchRL's ``RemoteTensorDictReplayBuffer`` in a real ``torch.distributed.rpc`` world: the buffer
lives in another process; the trainer calls its methods on an ``RRef`` (TorchRL's test_rb_distributed)."""

import multiprocessing

import pytest
import torch
from tensordict import TensorDict
from torch.distributed import rpc

from reap_replay import (
    LazyMemmapStorage,
    RandomSampler,
    RemoteTensorDictReplayBuffer,
    RoundRobinWriter,
)
from reap_testing import free_loopback_port, rpc_options, rpc_peer


def test_methods_called_on_an_rref_run_on_the_owner_s_buffer(tmp_path, monkeypatch):
    for name in ("TP_SOCKET_IFNAME", "GLOO_SOCKET_IFNAME"):  # this process's sockets on loopback too
        monkeypatch.setenv(name, "lo")
    port = free_loopback_port()
    owner = multiprocessing.get_context("spawn").Process(target=rpc_peer, args=("BUFFER", 1, 2, port))
    owner.start()
    rpc.init_rpc("TRAINER", rank=0, world_size=2, rpc_backend_options=rpc_options(port))
    try:
        storage = LazyMemmapStorage(100, scratch_dir=tmp_path)
        rref = rpc.remote("BUFFER", RemoteTensorDictReplayBuffer,
                          kwargs={"storage": storage, "sampler": RandomSampler(), "writer": RoundRobinWriter()})
        assert rref.owner().name == "BUFFER"
        data = TensorDict({"a": torch.arange(3), "b": torch.arange(3.0)[:, None] * 10}, [3])
        call = rpc.rpc_sync
        index = call("BUFFER", RemoteTensorDictReplayBuffer.extend, args=(rref, data))
        assert index.tolist() == [0, 1, 2]
        assert call("BUFFER", RemoteTensorDictReplayBuffer.add, args=(rref, data[1])) == 3
        sample = call("BUFFER", RemoteTensorDictReplayBuffer.sample, args=(rref, 64))
        assert isinstance(sample, TensorDict) and sample.batch_size == (64,)
        assert set(sample["a"].tolist()) == {0, 1, 2} and torch.equal(sample["b"][:, 0], sample["a"] * 10.0)
        assert len(rref.to_here()) == 4  # the owner's buffer, copied here
        call("BUFFER", RemoteTensorDictReplayBuffer.empty, args=(rref,))
        with pytest.raises(RuntimeError, match="empty"):
            call("BUFFER", RemoteTensorDictReplayBuffer.sample, args=(rref, 2))
    finally:
        rpc.shutdown()
        owner.join(60)
    assert owner.exitcode == 0
