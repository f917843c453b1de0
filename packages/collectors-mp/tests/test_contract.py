"""reap_testing's backend contract on reap-collectors-mp (workers forked from a server)."""

from reap_testing.contract import BackendContract


class TestContract(BackendContract):
    backend = "mp"
    options = {"mp_start_method": "forkserver"}
