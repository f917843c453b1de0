"""launcher="submitit" with submitit's local executor: each worker a job on this machine."""

import pytest
import torch

from reap_rpc import DistributedCollector
from reap_testing import ConstantPolicy, env_fn

submitit = pytest.importorskip("submitit", reason="submitit is an optional extra: reap-collectors-rpc[submitit]")
pytestmark = pytest.mark.slow  # jobs import torch: seconds


def test_submitit_local_executor_collects_and_takes_weights(tmp_path):
    policy = ConstantPolicy(1.0)
    with DistributedCollector([env_fn(batch=2)] * 2, policy.as_module(), frames_per_batch=16, total_frames=32,
                              sync=True, launcher="submitit", start_timeout=240,
                              slurm_kwargs={"executor": "local", "folder": str(tmp_path), "timeout_min": 5}) as collector:
        weights = []
        for batch in collector:
            assert batch.batch_size == torch.Size([2, 2, 4])
            weights.append(batch["action"].unique().tolist())
            policy.weight.data.fill_(3.0)
            collector.update_policy_weights_(policy)
        jobs = collector._jobs
    assert weights == [[1.0], [3.0]]
    for job in jobs:
        job.wait()  # each job ended with the collector
