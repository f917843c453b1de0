"""One rank of the two-"node" torchrun test: rank 0 trains, every other rank collects.

Run by test_torchrun.py as ``torchrun --nnodes=2 --nproc-per-node=2 --node-rank=N ...
torchrun_example.py CLASS PORT``; rank 0 prints ``OK <batches> <weights seen>``.
"""

import sys

import torch

import reap_rpc
from reap_testing import ConstantPolicy, env_fn


def main() -> None:
    cls, port = getattr(reap_rpc, sys.argv[1]), int(sys.argv[2])
    rank = int(__import__("os").environ["RANK"])
    if rank:
        reap_rpc.serve(tcp_port=port, timeout=120)
        return
    policy = ConstantPolicy(1.0)
    with cls([env_fn(batch=2)] * 3, policy.as_module(), worker_tags=True, frames_per_batch=24, total_frames=72, sync=True,
             launcher="torchrun", tcp_port=port, start_timeout=120) as collector:
        weights = []
        for i, batch in enumerate(collector):
            ids = batch["collector", "worker_id"].reshape(3, -1)
            assert [row.unique().tolist() for row in ids] == [[0], [1], [2]], ids
            weights.append(batch["action"].flatten().unique().tolist())
            policy.weight.data.fill_(10.0 + i)
            collector.update_policy_weights_(policy)
        hosts = sorted(info["pid"] for info in collector._infos)
    assert weights == [[1.0], [10.0], [11.0]], weights
    print("OK", len(weights), len(hosts), torch.__version__, flush=True)


if __name__ == "__main__":
    main()
