"""Test helpers of reap-value: make the reference loops importable as ``value_reference``."""

from __future__ import annotations

import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).parent))
