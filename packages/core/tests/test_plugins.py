import importlib
import importlib.metadata
import os
import re
import subprocess
import sys
import textwrap

import pytest

import reap
from reap import Collector, GymEnv, MultiCollector, hookimpl, hookspecs
from reap.plugins import (
    KNOWN_PROVIDERS,
    PluginNotInstalledError,
    get_collector_backend,
    get_recurrent_backend,
    hook,
    install_command,
)


def test_local_backend_is_registered_through_the_hooks():
    entry = get_collector_backend("local")
    assert entry.summary and callable(entry.factory)
    c = Collector(GymEnv("CartPole-v1"), None, frames_per_batch=4, total_frames=4, backend="local")
    assert type(c) is Collector
    c.shutdown()


def _uninstalled(names):
    """(name, distribution) pairs of KNOWN_PROVIDERS whose distribution is not installed here."""
    out = []
    for name in names:
        dist = KNOWN_PROVIDERS[name]
        try:
            importlib.metadata.distribution(dist)
        except importlib.metadata.PackageNotFoundError:
            out.append((name, dist))
    return out


# Derived from the install-hint table, so the tests follow whichever packages are installed; the
# integration tests (integration-tests/test_install_some_packages.py) cover each package absent.
_ABSENT_BACKENDS = _uninstalled(["ray", "rpc", "distributed"])
_ABSENT_NAMES = _uninstalled(["RayCollector", "RPCCollector", "DistributedCollector"])


@pytest.mark.skipif(not _ABSENT_BACKENDS, reason="every remote backend package is installed")
@pytest.mark.parametrize("name,dist", _ABSENT_BACKENDS or [("", "")])
def test_uninstalled_backend_names_the_package(name, dist):
    with pytest.raises(PluginNotInstalledError, match=re.escape(f"install it with {install_command(dist)}")):
        Collector([lambda: GymEnv("CartPole-v1")], None, frames_per_batch=4, backend=name)


def test_unknown_backend_and_recurrent_backend():
    with pytest.raises(PluginNotInstalledError, match="no collector backend named 'nope'"):
        get_collector_backend("nope")
    with pytest.raises(PluginNotInstalledError, match="no recurrent backend named 'nope'"):
        get_recurrent_backend("nope")


@pytest.mark.skipif(not _ABSENT_NAMES, reason="every remote backend package is installed")
def test_public_names_of_uninstalled_packages_raise_import_error():
    name, dist = _ABSENT_NAMES[0]
    with pytest.raises(ImportError, match=f"{name} is provided by {dist}"):
        getattr(reap, name)
    with pytest.raises(AttributeError, match="has no attribute 'Nonexistent'"):
        reap.Nonexistent  # noqa: B018


def test_every_hook_is_documented():
    specs = [getattr(hookspecs, n) for n in dir(hookspecs) if n.startswith("reap_")]
    assert len(specs) >= 9
    for spec in specs:
        assert spec.__doc__ and len(spec.__doc__) > 20, spec.__name__


def test_lifecycle_hooks_reach_a_registered_plugin():
    calls = []

    class Recorder:
        @hookimpl
        def reap_collector_start(self, collector, worker_idx):
            calls.append(("start", worker_idx))

        @hookimpl
        def reap_rollout_end(self, collector, worker_idx, frames):
            calls.append(("rollout_end", frames))

        @hookimpl
        def reap_batch_ready(self, collector, batch):
            calls.append(("batch", batch.numel()))

        @hookimpl
        def reap_collector_shutdown(self, collector, worker_idx):
            calls.append(("shutdown", worker_idx))

    pm = reap.plugins.get_registries().pm
    plugin = Recorder()
    pm.register(plugin)
    try:
        with Collector(GymEnv("CartPole-v1"), None, frames_per_batch=5, total_frames=10) as c:
            list(c)
    finally:
        pm.unregister(plugin)
    assert calls == [("start", -1), ("rollout_end", 5), ("batch", 5), ("rollout_end", 5), ("batch", 5),
                     ("shutdown", -1)]
    assert hook() is pm.hook


def test_multicollector_without_mp_names_the_package(monkeypatch):
    monkeypatch.setattr(reap.plugins.get_registries(), "backends", {})
    with pytest.raises(PluginNotInstalledError, match="reap-collectors-mp"):
        MultiCollector([lambda: GymEnv("CartPole-v1")], None, frames_per_batch=4, sync=True)


PLUGINS = {  # entry-point name: the module's source; each is a real dist-info on PYTHONPATH
    "demo": """
        from reap import hookimpl
        from reap.registry import CollectorBackend

        @hookimpl
        def reap_register_collector_backends(register):
            register(CollectorBackend("demo", dict, "a demo backend"))
    """,
    "broken": "raise ImportError('missing dependency foo')\n",
    "skipped": "raise ImportError('never loaded')\n",  # disabled by name: never imported
}


@pytest.fixture(scope="module")
def reap_plugins_run(tmp_path_factory) -> subprocess.CompletedProcess:
    """``python -m reap.cli plugins`` in a fresh interpreter with the three plugins above installed
    and ``REAP_DISABLE_PLUGINS=skipped`` (one interpreter start for every test that reads it)."""
    path = tmp_path_factory.mktemp("plugins")
    for name, source in PLUGINS.items():
        (path / f"reap_{name}_plugin.py").write_text(textwrap.dedent(source))
        dist = path / f"reap_{name}_plugin-1.2.3.dist-info"
        dist.mkdir()
        (dist / "METADATA").write_text(f"Metadata-Version: 2.1\nName: reap-{name}-plugin\nVersion: 1.2.3\n")
        (dist / "entry_points.txt").write_text(f"[reap]\n{name} = reap_{name}_plugin\n")
    environ = {**os.environ, "PYTHONPATH": str(path), "REAP_DISABLE_PLUGINS": "skipped"}
    return subprocess.run([sys.executable, "-m", "reap.cli", "plugins"], capture_output=True, text=True,
                          env=environ, timeout=120)


def test_reap_entry_point_runs(reap_plugins_run):
    assert reap_plugins_run.returncode == 0, reap_plugins_run.stderr
    assert "local: reap-core " in reap_plugins_run.stdout and "    collector backends: local\n" in reap_plugins_run.stdout


def test_third_party_plugin_registers_a_backend(reap_plugins_run):
    assert "demo: reap-demo-plugin 1.2.3\n    collector backends: demo\n" in reap_plugins_run.stdout


def test_broken_plugin_is_reported_not_fatal(reap_plugins_run):
    out = reap_plugins_run
    assert out.returncode == 0, out.stderr
    assert "broken: reap-broken-plugin 1.2.3\n    FAILED: ImportError: missing dependency foo\n" in out.stdout
    assert "reinstall" in out.stderr.lower() and "reap-broken-plugin" in out.stderr


def test_plugins_can_be_disabled_by_name(reap_plugins_run):
    out = reap_plugins_run
    assert "skipped" not in out.stdout and "never loaded" not in out.stdout + out.stderr
    assert "demo: reap-demo-plugin" in out.stdout  # only the one named is skipped


def test_reimporting_reap_keeps_the_registry():
    before = reap.plugins.get_registries()
    importlib.reload(reap.hookspecs)
    assert reap.plugins.get_registries() is before
