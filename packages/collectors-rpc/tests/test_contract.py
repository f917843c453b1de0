"""reap_testing's backend contract on RPCCollector (sync batches concatenated, as TorchRL's) and
DistributedCollector (stacked)."""

from reap_testing.contract import BackendContract


class TestRPCContract(BackendContract):
    backend = "rpc"
    sync_layout = "cat"


class TestDistributedContract(BackendContract):
    backend = "distributed"
