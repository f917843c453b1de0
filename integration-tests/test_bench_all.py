"""tools/bench_all.py from canned results (no benchmark runs): the table, the README markers, the
chart, and that the README and docs/speed.svg are what it draws from tools/bench_results.json."""

import importlib.util
import json
import re
import sys
import xml.etree.ElementTree as ET
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
TOOLS = ROOT / "tools"


@pytest.fixture(scope="module")
def bench_all():
    spec = importlib.util.spec_from_file_location("bench_all", TOOLS / "bench_all.py")
    module = importlib.util.module_from_spec(spec)
    sys.modules["bench_all"] = module
    spec.loader.exec_module(module)
    yield module
    sys.modules.pop("bench_all", None)


# Canned: given out of the table's order, one row with a note, one with no TorchRL ratio.
CANNED = {
    "bench_value": [{"case": "GAE `[16, 2048, 1]`", "reap_torchrl": 24.6}],
    "bench_collect": [
        {"case": "`Collector`, Pendulum, 1 env", "reap_raw": 0.84, "torchrl_raw": 0.11, "reap_torchrl": 7.7},
        {"case": "`Collector`, CartPole, 8 envs", "reap_raw": 0.891, "torchrl_raw": 0.044, "reap_torchrl": 20.14}],
    "bench_collect_rpc": [
        {"case": "`RPCCollector` async", "note": "0.11× reap's `MultiAsyncCollector`"},
        {"case": "`RPCCollector` sync", "reap_torchrl": 10.8, "note": "0.42× reap's `MultiSyncCollector`"}],
}
SVG = "{http://www.w3.org/2000/svg}"


def test_table_orders_benchmarks_and_formats_ratios(bench_all):
    assert bench_all.table(CANNED).splitlines() == [
        "| benchmark | what | reap / raw | TorchRL / raw | reap / TorchRL |",
        "|---|---|---|---|---|",
        "| `bench_collect.py` | `Collector`, Pendulum, 1 env | 0.84× | 0.11× | 7.7× |",
        "|  | `Collector`, CartPole, 8 envs | 0.89× | 0.04× | 20.1× |",
        "| `bench_collect_rpc.py` | `RPCCollector` async (0.11× reap's `MultiAsyncCollector`) |  |  |  |",
        "|  | `RPCCollector` sync (0.42× reap's `MultiSyncCollector`) |  |  | 10.8× |",
        "| `bench_value.py` | GAE `[16, 2048, 1]` |  |  | 24.6× |",
    ]


def test_replace_table_touches_only_what_lies_between_the_markers(bench_all):
    text = "# t\nbefore\n<!-- bench:start -->\nold\ntable\n<!-- bench:end -->\nafter\n"
    assert bench_all.replace_table(text, "NEW") == "# t\nbefore\n<!-- bench:start -->\nNEW\n<!-- bench:end -->\nafter\n"
    with pytest.raises(ValueError, match="one <!-- bench:start --> ... <!-- bench:end --> pair"):
        bench_all.replace_table("no markers here", "NEW")
    with pytest.raises(ValueError, match="bench:start"):
        bench_all.replace_table("<!-- bench:end -->\n<!-- bench:start -->", "NEW")


def test_bars_are_speeds_relative_to_torchrl(bench_all):
    assert bench_all.bars(CANNED["bench_collect"][0]) == pytest.approx(
        {"reap": 7.7, "TorchRL": 1.0, "raw loop": 7.7 / 0.84})
    assert bench_all.bars({"case": "c", "torchrl_raw": 0.5, "reap_torchrl": 3.0}) == pytest.approx(
        {"reap": 3.0, "TorchRL": 1.0, "raw loop": 2.0})
    assert bench_all.bars(CANNED["bench_value"][0]) == {"reap": 24.6, "TorchRL": 1.0}
    assert bench_all.bars(CANNED["bench_collect_rpc"][0]) == {}


def test_svg_draws_a_bar_per_measured_speed_on_a_log_scale(bench_all):
    root = ET.fromstring(bench_all.svg(CANNED))
    rects = [r for r in root.iter(f"{SVG}rect") if r.find(f"{SVG}title") is not None]
    titles = [r.find(f"{SVG}title").text for r in rects]
    # 2 collect rows x 3 bars, rpc sync x 2 (the async row has no TorchRL ratio), value x 2
    assert len(rects) == 10
    assert titles[:3] == ["reap: 7.7× TorchRL", "TorchRL: 1× TorchRL", "raw loop: 9.17× TorchRL"]
    x0 = float(rects[0].get("x"))
    widths = [float(r.get("width")) for r in rects]
    # log scale: the bar's length past the axis start grows with log(speed), TorchRL's bars all alike
    per_decade = (widths[0] - widths[1]) / 0.8864907  # log10(7.7)
    assert widths[2] - widths[1] == pytest.approx(per_decade * 0.9622977, abs=0.2)  # log10(9.1667)
    assert {widths[i] for i in (1, 4, 7, 9)} == {widths[1]}
    assert all(float(r.get("x")) == x0 for r in rects)
    labels = [t.text for t in root.iter(f"{SVG}text")]
    assert "Collector, Pendulum, 1 env" in labels and "RPCCollector async" not in labels
    assert "bench_collect_rpc.py" in labels and "1×" in labels


def test_render_writes_results_readme_and_chart(bench_all, tmp_path):
    results, readme, chart = tmp_path / "r.json", tmp_path / "README.md", tmp_path / "docs" / "speed.svg"
    results.write_text(json.dumps(CANNED))
    readme.write_text("intro\n<!-- bench:start -->\nstale\n<!-- bench:end -->\noutro\n")
    bench_all.main(["--render", "--results", str(results), "--readme", str(readme), "--chart", str(chart)])
    assert readme.read_text() == f"intro\n<!-- bench:start -->\n{bench_all.table(CANNED)}\n<!-- bench:end -->\noutro\n"
    assert chart.read_text() == bench_all.svg(CANNED)
    assert list(json.loads(results.read_text())) == ["bench_collect", "bench_collect_rpc", "bench_value"]


def test_only_names_an_existing_benchmark(bench_all, capsys):
    with pytest.raises(SystemExit):
        bench_all.main(["--only", "bench_nothing", "--quick"])
    assert "--only bench_nothing: no such benchmark; there are bench_collect, " in capsys.readouterr().err


def test_every_benchmark_writes_json_rows(bench_all):
    names = bench_all.benchmarks()
    assert names[:2] == ["bench_collect", "bench_collect_mp"] and "bench_all" not in names
    for name in names:
        source = (TOOLS / f"{name}.py").read_text()
        assert "add_json_option(parser)" in source and "write_rows(args.json," in source, name
        assert name in bench_all.QUICK_ARGS, f"{name} has no --quick arguments in bench_all.QUICK_ARGS"


def test_readme_table_and_chart_are_drawn_from_the_kept_results(bench_all):
    results = bench_all.load_results(bench_all.RESULTS)
    readme = (ROOT / "README.md").read_text()
    shown = re.search(r"<!-- bench:start -->\n(.*?)\n<!-- bench:end -->", readme, flags=re.S)
    assert shown is not None, "README.md lost its bench markers"
    assert shown.group(1) == bench_all.table(results), "run `python tools/bench_all.py --render`"
    assert bench_all.CHART.read_text() == bench_all.svg(results), "run `python tools/bench_all.py --render`"


def test_runs_each_benchmark_as_a_subprocess_and_keeps_old_figures_of_one_that_fails(
        bench_all, tmp_path, monkeypatch, capsys):
    tools = tmp_path / "tools"
    tools.mkdir()
    (tools / "bench_ok.py").write_text(
        "import argparse, json\n"
        "p = argparse.ArgumentParser(); p.add_argument('--json'); p.add_argument('--frames', default='all')\n"
        "a = p.parse_args()\n"
        "json.dump([{'case': 'frames ' + a.frames, 'reap_torchrl': 2.0}], open(a.json, 'w'))\n")
    (tools / "bench_broken.py").write_text("import sys\nsys.exit(3)\n")
    monkeypatch.setattr(bench_all, "TOOLS", tools)
    monkeypatch.setitem(bench_all.QUICK_ARGS, "bench_ok", ["--frames", "5"])
    results, readme, chart = tmp_path / "r.json", tmp_path / "README.md", tmp_path / "speed.svg"
    old = {"bench_broken": [{"case": "measured before", "reap_torchrl": 3.0}]}
    results.write_text(json.dumps(old))
    readme.write_text("<!-- bench:start -->\n<!-- bench:end -->\n")
    paths = ["--results", str(results), "--readme", str(readme), "--chart", str(chart)]
    with pytest.raises(SystemExit, match="failed: bench_broken"):
        bench_all.main(["--quick", *paths])
    assert "bench_broken.py exited with code 3" in capsys.readouterr().out
    kept = {"bench_broken": old["bench_broken"], "bench_ok": [{"case": "frames 5", "reap_torchrl": 2.0}]}
    assert json.loads(results.read_text()) == kept
    assert bench_all.table(kept) in readme.read_text()
    bench_all.main(["--only", "bench_ok", *paths])  # no --quick: the benchmark's own sizes
    assert json.loads(results.read_text())["bench_ok"] == [{"case": "frames all", "reap_torchrl": 2.0}]
