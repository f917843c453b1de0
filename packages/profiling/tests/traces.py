"""Reading Chrome traces in the tests: the names of the events, counted."""

from __future__ import annotations

import json
from collections import Counter
from pathlib import Path


def event_names(path: Path) -> Counter:
    """How many complete events of each name the trace at ``path`` holds (valid JSON or it fails)."""
    trace = json.loads(Path(path).read_text())
    return Counter(e["name"] for e in trace["traceEvents"] if e.get("ph") == "X")


def rollouts_in(names: Counter) -> list[int]:
    """The indices of the ``reap::rollout k`` ranges in a trace."""
    return sorted(int(n.rsplit(" ", 1)[1]) for n in names if n.startswith("reap::rollout "))
