"""Test helpers of reap-rnn-kernels: make the reference importable as ``rnn_reference``."""

from __future__ import annotations

import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).parent))
