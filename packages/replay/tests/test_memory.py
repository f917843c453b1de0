"""Huge-page advice for large storages: asked for where Linux offers it, harmless elsewhere."""

import os
import subprocess
import sys
from pathlib import Path

import pytest
import torch

from reap_replay import LazyTensorStorage
from reap_replay._memory import advise_huge_pages

_THP = Path("/sys/kernel/mm/transparent_hugepage/enabled")
thp_offered = sys.platform.startswith("linux") and _THP.exists() and "[never]" not in _THP.read_text()


def test_small_and_non_cpu_tensors_are_left_alone():
    assert advise_huge_pages(torch.empty(1000)) is False  # under one 2 MiB page
    assert advise_huge_pages(torch.empty(1 << 22, device="meta")) is False


@pytest.mark.skipif(not thp_offered, reason="the kernel offers no transparent huge pages")
def test_large_tensor_is_advised_and_its_data_kept():
    buf = torch.arange(1 << 22, dtype=torch.float32)
    assert advise_huge_pages(buf) is True
    assert torch.equal(buf, torch.arange(1 << 22, dtype=torch.float32))


def test_lazy_storage_rows_sit_in_advised_regions(monkeypatch):
    from reap_replay import storages

    advised = []
    monkeypatch.setattr(storages, "advise_huge_pages", lambda t: advised.append(t.shape) or True)
    s = LazyTensorStorage(100_000)
    s.set(slice(0, 2), torch.zeros(2, 17))
    assert advised == [torch.Size([100_000, 17])]


def test_opt_out_by_environment():
    code = "import torch; from reap_replay._memory import advise_huge_pages as a; print(a(torch.empty(1 << 22)))"
    env = {**os.environ, "REAP_REPLAY_HUGE_PAGES": "0"}
    out = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "False"
