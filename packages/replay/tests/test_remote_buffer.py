"""TorchRL's ``RemoteTensorDictReplayBuffer`` in a real ``torch.distributed.rpc`` world: the buffer
lives in one process, the trainer in another calls its methods on an ``RRef`` (TorchRL's
test_rb_distributed). Both are fresh processes: torch keeps a process's first RPC agent for RRefs."""

import multiprocessing

import torch

from reap_testing import pid_alive, remote_buffer_calls, rpc_peer, rpc_run


def test_methods_called_on_an_rref_run_on_the_owner_s_buffer(tmp_path):
    ctx = multiprocessing.get_context("spawn")
    rendezvous, results = str(tmp_path / "rendezvous"), ctx.Queue()
    owner = ctx.Process(target=rpc_peer, args=("BUFFER", 1, 2, rendezvous))
    trainer = ctx.Process(target=rpc_run, args=("TRAINER", 0, 2, rendezvous, remote_buffer_calls,
                                                ("BUFFER", str(tmp_path)), results))
    trainer.start()
    owner.start()
    try:
        out = results.get(timeout=120)
    finally:
        for peer in (trainer, owner):
            peer.join(60)
            if peer.is_alive():  # a stuck peer: no process of the test outlives it
                peer.kill()
                peer.join()
    assert isinstance(out, dict), out  # else the trainer's error
    # while the world ran, the peers' sockets (TensorPipe, gloo) listened on 127.0.0.1 only
    assert out["listening"] and {addr for addr, _ in out["listening"]} == {"127.0.0.1"}, out["listening"]
    assert out["owner"] == "BUFFER" and out["extend"] == [0, 1, 2] and out["add"] == 3
    sample = out["sample"]
    assert sample["a"].shape == (64,) and set(sample["a"].tolist()) == {0, 1, 2}
    assert torch.equal(sample["b"][:, 0], sample["a"] * 10.0)
    assert out["len"] == 4  # the owner's buffer, copied to the trainer
    assert "empty" in out["empty_sample"]
    assert (trainer.exitcode, owner.exitcode) == (0, 0)
    assert not pid_alive(trainer.pid) and not pid_alive(owner.pid)
