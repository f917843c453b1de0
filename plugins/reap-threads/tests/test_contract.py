"""reap_testing's backend contract on reap-threads: no worker thread outlives shutdown()."""

import threading

from reap_testing.contract import BackendContract


class TestContract(BackendContract):
    backend = "threads"

    def leftovers(self):
        return {t.name for t in threading.enumerate() if t.name.startswith(("reap-threads-worker", "reap-prefetch"))}
