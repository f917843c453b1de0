"""Test helpers of reap-rnn-kernels: make the reference importable as ``rnn_reference``, and run
the Triton kernels under Triton's interpreter where there is no GPU. The variable must be set
before triton is first imported: the root conftest.py sets it for a whole-suite run (other
packages' tests import torch._inductor, which imports triton); this repeats it for a run of this
package from another root."""

from __future__ import annotations

import os
import sys
from pathlib import Path

import torch

if not torch.cuda.is_available():
    os.environ.setdefault("TRITON_INTERPRET", "1")

sys.path.insert(0, str(Path(__file__).parent))
