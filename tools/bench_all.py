"""Every benchmark in tools/, one at a time: the README's speed table and docs/speed.svg from their figures.

    uv run --group bench python tools/bench_all.py [--only bench_value ...] [--quick]

Each ``tools/bench_*.py`` runs as a subprocess (alone on the machine: nothing else runs beside
it) with ``--json``, and its rows (see ``bench_json.py``) replace that benchmark's in
``tools/bench_results.json``. From all the results kept there it then rewrites the table between
``<!-- bench:start -->`` and ``<!-- bench:end -->`` in README.md and draws the chart
``docs/speed.svg``: per case, reap's, TorchRL's and the raw loop's speed relative to TorchRL's.
``--render`` redraws both from the results file without running anything.

``--quick`` runs each benchmark on small sizes to check the plumbing: its figures are not worth
keeping, so it prints the table and writes into the repository only the paths given explicitly
(``--results``, ``--readme``, ``--chart``).
"""

from __future__ import annotations

import argparse
import contextlib
import json
import math
import os
import signal
import subprocess
import sys
import tempfile
from html import escape
from pathlib import Path

TOOLS = Path(__file__).resolve().parent
ROOT = TOOLS.parent
RESULTS = TOOLS / "bench_results.json"
README = ROOT / "README.md"
CHART = ROOT / "docs" / "speed.svg"
START, END = "<!-- bench:start -->", "<!-- bench:end -->"

#: The table's order; a benchmark not named here comes after these, by name.
ORDER = ("bench_collect", "bench_collect_mp", "bench_collect_ray", "bench_collect_rpc", "bench_replay",
         "bench_value", "bench_rnn", "bench_profiling")
#: Arguments of a ``--quick`` run: small sizes, one round.
QUICK_ARGS = {
    "bench_collect": ["--frames", "2000", "--rounds", "1"],
    "bench_collect_mp": ["--frames", "4000", "--torchrl-frames", "2000", "--busy-frames", "320",
                         "--repeats", "3"],
    "bench_collect_ray": ["--fpb", "1024", "--batches", "2", "--rounds", "1", "--repeats", "3"],
    "bench_collect_rpc": ["--fpb", "512", "--batches", "2", "--rounds", "1"],
    "bench_replay": ["--quick"],
    "bench_value": ["--repeat", "2"],
    "bench_rnn": ["--rounds", "1"],
    "bench_profiling": ["--frames", "2000", "--rounds", "1"],
}
HEADER = ("| benchmark | what | reap / raw | TorchRL / raw | reap / TorchRL |\n"
          "|---|---|---|---|---|")
COLORS = {"reap": "#2a7ab0", "TorchRL": "#e07b39", "raw loop": "#8c8c8c"}


def benchmarks() -> list[str]:
    """Names of the ``tools/bench_*.py`` benchmarks, in the table's order."""
    found = {p.stem for p in TOOLS.glob("bench_*.py")} - {"bench_all", "bench_json"}
    return [n for n in ORDER if n in found] + sorted(found - set(ORDER))


def run_benchmark(name: str, *, quick: bool, timeout: float) -> list[dict]:
    """Runs ``tools/<name>.py`` (its output shown as it comes) and returns the rows it wrote."""
    with tempfile.TemporaryDirectory() as tmp:
        out = Path(tmp) / f"{name}.json"
        cmd = [sys.executable, str(TOOLS / f"{name}.py"), *(QUICK_ARGS.get(name, []) if quick else []),
               "--json", str(out)]
        print(f"\n=== {' '.join(cmd[1:])}", flush=True)
        # its own process group: on a timeout or Ctrl-C, its workers go with it
        proc = subprocess.Popen(cmd, cwd=ROOT, start_new_session=True)
        try:
            code = proc.wait(timeout=timeout)
        except BaseException:
            _stop_group(proc)
            raise
        if code != 0:
            raise RuntimeError(f"{name}.py exited with code {code}")
        if not out.exists():
            raise RuntimeError(f"{name}.py ended without writing its --json rows")
        return json.loads(out.read_text())


def _stop_group(proc: subprocess.Popen) -> None:
    """SIGTERM to the benchmark's process group, SIGKILL if it is still there 30 s later."""
    for sig, wait in ((signal.SIGTERM, 30), (signal.SIGKILL, 10)):
        with contextlib.suppress(ProcessLookupError):
            os.killpg(proc.pid, sig)
        try:
            proc.wait(timeout=wait)
            return
        except subprocess.TimeoutExpired:
            continue


def load_results(path: Path) -> dict[str, list[dict]]:
    return json.loads(path.read_text()) if path.exists() else {}


def ordered(results: dict[str, list[dict]]) -> list[tuple[str, list[dict]]]:
    known = [n for n in ORDER if n in results]
    return [(n, results[n]) for n in known + sorted(set(results) - set(known))]


def _ratio(value: float | None, digits: int) -> str:
    return "" if value is None else f"{value:.{digits}f}×"


def table(results: dict[str, list[dict]]) -> str:
    """The README's speed table (Markdown) from ``{benchmark: rows}``."""
    lines = [HEADER]
    for name, rows in ordered(results):
        for i, row in enumerate(rows):
            what = row["case"] + (f" ({row['note']})" if row.get("note") else "")
            lines.append(f"| {f'`{name}.py`' if i == 0 else ''} | {what} | {_ratio(row.get('reap_raw'), 2)} | "
                         f"{_ratio(row.get('torchrl_raw'), 2)} | {_ratio(row.get('reap_torchrl'), 1)} |")
    return "\n".join(lines)


def replace_table(text: str, block: str) -> str:
    """``text`` with what lies between the bench markers replaced by ``block``."""
    if text.count(START) != 1 or text.count(END) != 1 or text.index(START) > text.index(END):
        raise ValueError(f"the README needs one {START} ... {END} pair around the speed table")
    head, rest = text.split(START)
    tail = rest.split(END)[1]
    return f"{head}{START}\n{block}\n{END}{tail}"


def bars(row: dict) -> dict[str, float]:
    """Speeds relative to TorchRL's (TorchRL = 1) of what was measured for one row."""
    ours = row.get("reap_torchrl")
    if ours is None:
        return {}
    out = {"reap": ours, "TorchRL": 1.0}
    if row.get("reap_raw"):
        out["raw loop"] = ours / row["reap_raw"]
    elif row.get("torchrl_raw"):
        out["raw loop"] = 1 / row["torchrl_raw"]
    return out


def _plain(text: str) -> str:
    return text.replace("`", "")


def svg(results: dict[str, list[dict]]) -> str:
    """A horizontal bar chart (log scale) of :func:`bars` for every row with a TorchRL ratio."""
    groups = [(name, [(r, bars(r)) for r in rows if bars(r)]) for name, rows in ordered(results)]
    groups = [(name, rows) for name, rows in groups if rows]
    longest = max((len(_plain(r["case"])) for _, rows in groups for r, _ in rows), default=20)
    label_w, plot_w, bar_h, pad = 12 + 6 * longest, 420, 7, 6  # about 6 px a character at 11 px
    values = [v for _, rows in groups for _, b in rows for v in b.values()] or [1.0]
    lo = 10 ** math.floor(math.log10(min(values + [1.0]) / 1.01))
    hi = 10 ** math.ceil(math.log10(max(values) * 1.01))

    def x(v: float) -> float:
        return label_w + plot_w * (math.log10(v) - math.log10(lo)) / (math.log10(hi) - math.log10(lo))

    body, y = [], 58
    for name, rows in groups:
        body.append(f'<text x="4" y="{y + 12}" font-weight="bold">{escape(name)}.py</text>')
        y += 18
        for row, b in rows:
            height = len(b) * bar_h
            body.append(f'<text x="{label_w - 6}" y="{y + height / 2 + 4:.1f}" text-anchor="end">'
                        f'{escape(_plain(row["case"]))}</text>')
            for who in COLORS:
                if who not in b:
                    continue
                v = b[who]
                body.append(f'<rect x="{label_w}" y="{y}" width="{x(v) - label_w:.1f}" height="{bar_h - 1}" '
                            f'fill="{COLORS[who]}"><title>{escape(who)}: {v:.3g}× TorchRL</title></rect>')
                if who == "reap":
                    body.append(f'<text x="{x(v) + 3:.1f}" y="{y + bar_h - 1}" font-size="9">{v:.3g}×</text>')
                y += bar_h
            y += pad
        y += 4
    height = y + 10
    grid = []
    decade = lo
    while decade <= hi * 1.0001:
        for m in (1, 2, 5):
            v = decade * m
            if lo <= v <= hi * 1.0001:
                grid.append(f'<line x1="{x(v):.1f}" y1="52" x2="{x(v):.1f}" y2="{height - 10}" '
                            f'stroke="{"#999" if v == 1 else "#ddd"}"/>'
                            f'<text x="{x(v):.1f}" y="48" text-anchor="middle" font-size="10">{v:g}×</text>')
        decade *= 10
    legend = "".join(f'<rect x="{label_w + i * 110}" y="8" width="10" height="10" fill="{c}"/>'
                     f'<text x="{label_w + i * 110 + 14}" y="17">{escape(who)}</text>'
                     for i, (who, c) in enumerate(COLORS.items()))
    width = label_w + plot_w + 50
    return (f'<svg xmlns="http://www.w3.org/2000/svg" width="{width}" height="{height}" '
            f'viewBox="0 0 {width} {height}" font-family="sans-serif" font-size="11">\n'
            f'<rect width="100%" height="100%" fill="white"/>\n'
            f'<text x="4" y="17" font-weight="bold">Speed relative to TorchRL (log scale)</text>\n'
            f'<text x="4" y="32" font-size="10">higher is faster; tools/bench_all.py</text>\n'
            f'{legend}\n' + "\n".join(grid) + "\n" + "\n".join(body) + "\n</svg>\n")


def write(results: dict[str, list[dict]], *, results_path: Path | None, readme: Path | None,
          chart: Path | None) -> None:
    """Writes the results, the README table and the chart to the paths given (None: skipped)."""
    if results_path is not None:
        results_path.write_text(json.dumps(dict(ordered(results)), indent=1, ensure_ascii=False) + "\n")
    if readme is not None:
        readme.write_text(replace_table(readme.read_text(), table(results)))
    if chart is not None:
        chart.parent.mkdir(parents=True, exist_ok=True)
        chart.write_text(svg(results))


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--only", nargs="+", metavar="NAME", help="run only these (e.g. bench_value)")
    parser.add_argument("--quick", action="store_true", help="small sizes, to check the plumbing")
    parser.add_argument("--render", action="store_true", help="run nothing: redraw from --results")
    parser.add_argument("--timeout", type=float, default=None, help="seconds per benchmark (default "
                        "3600, quick 600)")
    parser.add_argument("--results", type=Path, default=None, help=f"default {RESULTS.relative_to(ROOT)}")
    parser.add_argument("--readme", type=Path, default=None, help="default README.md")
    parser.add_argument("--chart", type=Path, default=None, help=f"default {CHART.relative_to(ROOT)}")
    args = parser.parse_args(argv)
    names = benchmarks()
    for name in args.only or []:
        if name.removesuffix(".py") not in names:
            parser.error(f"--only {name}: no such benchmark; there are {', '.join(names)}")
    if args.quick and args.render:
        parser.error("--render runs nothing, so --quick means nothing with it")
    keep = not args.quick  # a quick run's figures go only where asked
    results_path = args.results or (RESULTS if keep else None)
    readme = args.readme or (README if keep else None)
    chart = args.chart or (CHART if keep else None)
    results = load_results(args.results or RESULTS)
    failed = []
    if not args.render:
        timeout = args.timeout or (600 if args.quick else 3600)
        for name in [n.removesuffix(".py") for n in args.only] if args.only else names:
            try:
                results[name] = run_benchmark(name, quick=args.quick, timeout=timeout)
            except (RuntimeError, subprocess.TimeoutExpired, json.JSONDecodeError) as exc:
                print(f"{name}: FAILED ({exc}); its previous figures are kept", flush=True)
                failed.append(name)
                continue
            if results_path is not None:  # a later failure keeps the figures measured so far
                write(results, results_path=results_path, readme=None, chart=None)
    print("\n" + table(results))
    write(results, results_path=results_path, readme=readme, chart=chart)
    print("\nwritten: " + (", ".join(str(p) for p in (results_path, readme, chart) if p) or "nothing (--quick)"))
    if failed:
        sys.exit(f"failed: {', '.join(failed)} (see above)")


if __name__ == "__main__":
    main()
