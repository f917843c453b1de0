"""Settings the whole test session needs before any test module imports anything.

Triton reads ``TRITON_INTERPRET`` when it is first imported, and several packages import it
indirectly (torch.profiler and torch.compile load torch._inductor, which loads triton). Without a
GPU, reap-rnn-kernels' Triton kernels run under Triton's interpreter, so the variable is set here,
before the first test module is collected, rather than in that package's own conftest.
"""

import os

import torch

if not torch.cuda.is_available():
    os.environ.setdefault("TRITON_INTERPRET", "1")
