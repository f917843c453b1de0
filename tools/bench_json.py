"""The figures a benchmark hands to ``tools/bench_all.py``: with ``--json PATH`` it writes them there.

A row is one line of the README's speed table: ``case`` (what was measured) and the ratios that
were measured among ``reap_raw`` (reap's speed over the raw loop's), ``torchrl_raw`` and
``reap_torchrl`` (>1: reap is faster), plus an optional ``note``.
"""

from __future__ import annotations

import json
from pathlib import Path


def add_json_option(parser) -> None:
    parser.add_argument("--json", metavar="PATH", default=None,
                        help="also write the figures as JSON rows (read by tools/bench_all.py)")


def row(case: str, *, reap_raw: float | None = None, torchrl_raw: float | None = None,
        reap_torchrl: float | None = None, note: str | None = None) -> dict:
    """One table row; the ratios that were not measured are left out."""
    out = {"case": case, "reap_raw": reap_raw, "torchrl_raw": torchrl_raw, "reap_torchrl": reap_torchrl,
           "note": note}
    return {k: v for k, v in out.items() if v is not None}


def write_rows(path: str | None, rows: list[dict]) -> None:
    """Writes ``rows`` to ``path`` as JSON (nothing when ``path`` is None)."""
    if path is not None:
        Path(path).write_text(json.dumps(rows, indent=1) + "\n")
