"""A script's own functions and classes reach the actors, even those defined under its main
guard (Ray sends them by value): the script runs as a file, joining the tests' Ray."""

import json
import os
import subprocess
import sys
import textwrap

import pytest
import ray

from reap_testing import group_left

pytestmark = pytest.mark.slow  # a fresh interpreter joins Ray: seconds

SCRIPT = textwrap.dedent("""
    import json
    from reap_testing import EchoEnv, constant_policy
    from reap_ray import RayCollector

    if __name__ == "__main__":
        def make2():  # defined under the guard: not an attribute of the module the actors import
            return EchoEnv(batch=2)

        class Make2:
            def __call__(self):
                return EchoEnv(batch=2)

        with RayCollector([make2, Make2()], constant_policy(2.0), frames_per_batch=8, total_frames=16,
                          sync=True) as collector:
            print(json.dumps([[list(b.batch_size), b["action"].unique().tolist()] for b in collector]))
""")


def test_functions_and_classes_of_main_reach_the_actors(tmp_path):
    path = tmp_path / "guarded.py"
    path.write_text(SCRIPT)
    env = {**os.environ, "RAY_ADDRESS": ray.get_runtime_context().gcs_address}
    proc = subprocess.Popen([sys.executable, str(path)], env=env, cwd=tmp_path, stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, text=True, start_new_session=True)
    try:
        out, err = proc.communicate(timeout=300)
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.communicate(timeout=10)
    assert proc.returncode == 0, err
    assert json.loads(out.splitlines()[-1]) == [[[2, 2, 2], [2.0]]] * 2
    assert not group_left(proc.pid)
