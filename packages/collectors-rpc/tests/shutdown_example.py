"""Collectors shut down in a process of their own, for test_shutdown.py to read everything the
driver and its workers print (the workers' stderr is this process's: the forkserver that
starts them inherits it).

Run as ``python shutdown_example.py``; prints one ``shutdown <case> <seconds>`` line per case,
then ``OK``. After each shutdown no worker process is left.
"""

import sys
import time

import torch
from tensordict.nn import TensorDictModule

from reap import GymEnv
from reap_rpc import DistributedCollector, RPCCollector
from reap_testing import wait_gone, worker_pids


def pendulum():
    return GymEnv("Pendulum-v1", num_envs=4)


def run(case: str, cls, *, frames_per_batch: int, total_frames: int, sync: bool, stop_after: int) -> None:
    policy = TensorDictModule(torch.nn.Linear(3, 1), in_keys=["observation"], out_keys=["action"])
    collector = cls([pendulum] * 2, policy, frames_per_batch=frames_per_batch, total_frames=total_frames, sync=sync)
    for i, _ in enumerate(collector):
        collector.update_policy_weights_(policy)
        if i + 1 == stop_after:
            break  # requests are still in flight
    start = time.monotonic()
    collector.shutdown()
    print(f"shutdown {case} {time.monotonic() - start:.2f}", flush=True)
    left = wait_gone(worker_pids(), timeout=15.0)
    assert not left, f"{case}: processes outlived shutdown(): {sorted(left)}"


def main() -> None:
    run("rpc-end", RPCCollector, frames_per_batch=64, total_frames=192, sync=True, stop_after=-1)
    # left early, each worker in the middle of a batch; the second RPC agent of this process
    run("rpc-break", RPCCollector, frames_per_batch=2000, total_frames=-1, sync=False, stop_after=2)
    run("gloo-break", DistributedCollector, frames_per_batch=2000, total_frames=-1, sync=False, stop_after=2)
    print("OK", flush=True)


if __name__ == "__main__":
    sys.exit(main())
