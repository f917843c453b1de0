import os
import subprocess
import sys

import pytest

from reap_replay import checkpoint as ckpt


@pytest.fixture
def dumps_crashing_at(monkeypatch):
    """``run(rb, path, step)``: ``rb.dumps(path)`` interrupted (KeyboardInterrupt) at ``step``,
    one of the checkpoint writer's named steps (``ckpt._hook``); the hook is removed after."""

    def run(rb, path, step: str) -> None:
        def crash(name):
            if name == step:
                raise KeyboardInterrupt(f"simulated crash at {name}")

        with monkeypatch.context() as patched:
            patched.setattr(ckpt, "_hook", crash)
            with pytest.raises(KeyboardInterrupt, match=step):
                rb.dumps(path)

    return run


KILLED_PROCESS = """
import os, sys, torch
from tensordict import TensorDict
from reap_replay import LazyMemmapStorage, LazyTensorStorage, TensorDictPrioritizedReplayBuffer, TensorDictReplayBuffer
from reap_replay import checkpoint as ckpt, storages
scratch, ckpt_dir, after_dumps, mid_extend = sys.argv[1:]
# 1. a memmap buffer written in 7 extends (wrapping around a 50-row ring)
rb = TensorDictReplayBuffer(storage=LazyMemmapStorage(50, scratch_dir=scratch))
for i in range(7):
    ids = torch.arange(i * 10, i * 10 + 10, dtype=torch.float32)
    rb.extend(TensorDict({"obs": ids[:, None].expand(10, 3).clone(), "next": {"r": ids.clone()}}, [10]))
# 2. a checkpoint, then a second dumps killed in the middle (in a forked process: no new
# interpreter to start, and this one goes on)
small = TensorDictReplayBuffer(storage=LazyTensorStorage(16))
small.extend(TensorDict({"x": torch.arange(4.0)}, [4]))
small.dumps(ckpt_dir)
small.extend(TensorDict({"x": torch.arange(4.0, 9.0)}, [5]))
pid = os.fork()
if pid == 0:
    ckpt._hook = lambda name: os._exit(9) if name == "data_renamed" else None
    small.dumps(ckpt_dir)
    os._exit(0)
assert os.waitstatus_to_exitcode(os.waitpid(pid, 0)[1]) == 9
# 3. two prioritized buffers checkpointed in place; this process is killed between the leaves of
# a write to the second: the first leaf of rows 8..11 is new, the others old
def data(n, start):
    ids = torch.arange(start, start + n, dtype=torch.float32)
    return TensorDict({"obs": ids[:, None].expand(n, 3).clone(), "count": torch.arange(start, start + n),
                       "next": {"reward": ids[:, None].clone(), "done": torch.zeros(n, 1, dtype=torch.bool)}}, [n])
for path in (after_dumps, mid_extend):
    rb = TensorDictPrioritizedReplayBuffer(alpha=0.7, beta=0.5, batch_size=8,
                                           storage=LazyMemmapStorage(32, scratch_dir=path))
    rb.extend(data(40, 0))
    rb.dumps(path)
calls = []
original = storages.TensorStorage._write_leaf
def write_leaf(buf, index, value):
    original(buf, index, value)
    calls.append(1)
    if len(calls) == 1:
        os._exit(9)
storages.LazyMemmapStorage._write_leaf = staticmethod(write_leaf)
rb.extend(data(4, 900))
"""


@pytest.fixture(scope="session")
def killed_process(tmp_path_factory):
    """The directories a process left when it was killed (``os._exit``, no cleanup) at three
    points: ``scratch`` (a memmap buffer it wrote), ``ckpt_dir`` (a checkpoint and a second
    ``dumps`` killed in the middle), ``after_dumps`` and ``mid_extend`` (in-place checkpoints, the
    second killed in the middle of a write). One process for all: each costs seconds to start."""
    root = tmp_path_factory.mktemp("killed")
    paths = {name: root / name for name in ("scratch", "ckpt_dir", "after_dumps", "mid_extend")}
    proc = subprocess.run([sys.executable, "-c", KILLED_PROCESS, *map(str, paths.values())],
                          capture_output=True, text=True, timeout=300)
    assert proc.returncode == 9, proc.stderr
    assert not [name for name in os.listdir(root) if name not in paths]
    return paths
