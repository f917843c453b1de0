"""The driver's own process: ports, its environment, a user's default process group beside a
collector, and collectors built one after the other."""

import os
import socket

import pytest
import torch
import torch.distributed as dist
from torch.nn.parallel import DistributedDataParallel

from reap.collectors.spawn import REPORTS_ENV
from reap.plugins import get_registries
from reap_rpc import DistributedCollector, PortInUseError, RPCCollector
from reap_testing import ConstantPolicy, env_fn


def test_busy_port_is_an_error_naming_it_and_starts_nothing():
    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen(1)
        port = taken.getsockname()[1]
        with pytest.raises(PortInUseError, match=rf"tcp_port={port} on 127.0.0.1 is already in use; pass another tcp_port"):
            RPCCollector([env_fn()], None, frames_per_batch=4, tcp_port=port)


@pytest.mark.parametrize("kwargs, match", [
    ({"launcher": "ssh"}, r"launcher must be one of \('mp', 'torchrun', 'submitit'\), got 'ssh'"),
    ({"backend": "nccl"}, "backend='nccl' needs CUDA policies"),
    ({"sync": True, "frames_per_batch": 5}, r"sync=True splits frames_per_batch=5 evenly across 2 collectors; pass a multiple of 2"),
    ({"max_weight_update_interval": -2}, "max_weight_update_interval must be -1"),
    ({"tcp_port": "http"}, "tcp_port must be a port number"),
    ({"collector_class": "parallel"}, r"collector_class must be a collector class or one of \('single', 'sync', 'async'\)"),
    ({"worker_timeout": 0}, "worker_timeout must be a positive number of seconds"),
    ({"weight_sync_schemes": {"policy": "ray"}}, "weight_sync_schemes must be"),
    ({"visible_devices": "cuda:0"}, r"visible_devices names 'cuda:0', but reap's remote workers .*\(batch\.to\('cuda'\)"),
    ({"visible_devices": [0, "cpu"]}, "visible_devices names 0"),  # an int is a CUDA index, as in torch
    ({"visible_devices": ["cpu"]}, "visible_devices has 1 entries but there are 2 collectors"),
    ({"visible_devices": 1.5}, "visible_devices must be devices"),
    ({"bogus_option": 1}, r"(RPC|Distributed)Collector: unexpected keyword argument 'bogus_option'"),
    ({"collector_kwargs": {"reset_when_done": False}}, "reset_when_done=False is not supported by reap"),
])
def test_bad_arguments_fail_before_any_process_starts(kwargs, match):
    args = {"frames_per_batch": 4, **kwargs}
    for cls in (RPCCollector, DistributedCollector):
        with pytest.raises((ValueError, TypeError, NotImplementedError), match=match):
            cls([env_fn(), env_fn()], ConstantPolicy(1.0).as_module(), **args)


@pytest.mark.slow
def test_user_default_process_group_works_beside_collectors_built_one_after_another():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    dist.init_process_group("gloo", init_method=f"tcp://127.0.0.1:{port}", rank=0, world_size=1)
    try:
        model = DistributedDataParallel(torch.nn.Linear(2, 1))
        get_registries()  # every plugin loaded first (importing ray sets RAY_CLIENT_MODE)
        environ = dict(os.environ)
        for cls in (DistributedCollector, RPCCollector, RPCCollector):  # RPC twice: the agent starts again
            policy = ConstantPolicy(2.0)
            with cls([env_fn()], policy.as_module(), frames_per_batch=4, total_frames=8) as collector:
                for batch in collector:
                    assert batch["action"].flatten().unique().tolist() == [2.0]
                    model(torch.ones(3, 2)).sum().backward()  # DDP's all-reduce on the user's group
                    t = torch.ones(1)
                    dist.all_reduce(t)
                    assert t.item() == 1.0
            assert dist.is_initialized() and dist.get_world_size() == 1
        # nothing written into the caller's environment but where a worker leaves its main-guard
        # explanation (reap.collectors.spawn: named once per process, by whichever backend starts first)
        environ.pop(REPORTS_ENV, None)
        assert {k: v for k, v in os.environ.items() if k != REPORTS_ENV} == environ
        from torch.distributed import rpc
        from torch.distributed.rpc import backend_registry

        # torch's RPC registry untouched: a user's own rpc.init_rpc(backend=TENSORPIPE) still works
        assert isinstance(rpc.BackendType.TENSORPIPE, backend_registry.BackendType)
    finally:
        dist.destroy_process_group()
