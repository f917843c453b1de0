import os
import subprocess
import sys

import tensordict._utils_options
from tensordict import set_lazy_legacy

from reap.collectors.spawn import prepare_reports


def test_workers_start_without_the_lazy_legacy_value_tensordict_leaves_behind(monkeypatch):
    monkeypatch.delenv("LAZY_LEGACY_OP", raising=False)
    monkeypatch.setattr(tensordict._utils_options, "_LAZY_OP", None)  # as before anything set it (TorchRL does)
    with set_lazy_legacy(True):  # as tensordict's own torch.stack does for some stacks
        pass
    assert os.environ["LAZY_LEGACY_OP"] == "None"
    stack = "import torch, tensordict; torch.stack([tensordict.TensorDict(a=torch.zeros(1))] * 2)"
    broken = subprocess.run([sys.executable, "-c", stack], capture_output=True, text=True, timeout=120)
    assert "invalid truth value 'none'" in broken.stderr
    prepare_reports()  # what every process backend calls before it starts a worker
    assert "LAZY_LEGACY_OP" not in os.environ
    subprocess.run([sys.executable, "-c", stack], check=True, timeout=120)
