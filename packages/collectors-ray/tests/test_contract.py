"""reap_testing's backend contract on reap-collectors-ray: no reap actor outlives shutdown()."""

from reap_ray.testing import wait_no_reap_actors
from reap_testing.contract import BackendContract


class TestContract(BackendContract):
    backend = "ray"

    def leftovers(self):
        return wait_no_reap_actors(10.0)
