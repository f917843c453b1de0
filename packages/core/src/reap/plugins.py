"""The plugin manager: loads every installed ``reap`` plugin once, on first use.

Set ``REAP_DISABLE_PLUGIN_AUTOLOAD=1`` to load none but the built-ins, or
``REAP_DISABLE_PLUGINS=name1,name2`` to skip some by entry-point name.

Examples:
    >>> from reap.plugins import collector_backends
    >>> "local" in collector_backends()
    True
"""

from __future__ import annotations

import functools
import importlib
import importlib.metadata
import json
import os
import traceback
import urllib.parse
import urllib.request
import warnings
from dataclasses import dataclass, field
from pathlib import Path

import pluggy

from reap import hookspecs
from reap.export_hints import EXPORT_HINTS
from reap.registry import CollectorBackend, RecurrentBackend, WeightSyncSchemeEntry

hookimpl = pluggy.HookimplMarker("reap")

ENTRY_POINT_GROUP = "reap"

#: Which distribution provides each well-known backend, scheme or public name, for install hints.
#: Public names come from the generated :data:`reap.export_hints.EXPORT_HINTS`.
KNOWN_PROVIDERS = {
    "mp": "reap-collectors-mp",
    "ray": "reap-collectors-ray",
    "rpc": "reap-collectors-rpc",
    "distributed": "reap-collectors-rpc",
    "shared_mem": "reap-collectors-mp",
    "pipe": "reap-collectors-mp",
    "pad": "reap-rnn-kernels",
    "scan": "reap-rnn-kernels",
    "triton": "reap-rnn-kernels",
    **{name: dist for name, (dist, _) in EXPORT_HINTS.items()},
}


#: reap's own distributions (none is on a package registry): each one's folder in the repository,
#: and the other reap packages it needs besides reap-core.
PACKAGES = {
    "reap-core": ("packages/core", ()),
    "reap-collectors-mp": ("packages/collectors-mp", ()),
    "reap-collectors-ray": ("packages/collectors-ray", ("reap-replay",)),
    "reap-collectors-rpc": ("packages/collectors-rpc", ()),
    "reap-replay": ("packages/replay", ()),
    "reap-value": ("packages/value", ()),
    "reap-rnn-kernels": ("packages/rnn-kernels", ()),
    "reap-profiling": ("packages/profiling", ()),
    "reap-threads": ("plugins/reap-threads", ()),
}


class PluginNotInstalledError(ImportError, KeyError):
    """Something was asked for that no installed plugin provides."""


@functools.cache
def repository() -> Path | None:
    """The clone of reap's repository that reap-core was installed from, if it is on this machine.

    Found from reap-core's install record (``direct_url.json``: a folder, editable or not), or
    from where this file is (running from a clone); None for an install from a wheel.
    """
    try:
        record = importlib.metadata.distribution("reap-core").read_text("direct_url.json") or "{}"
        url = json.loads(record).get("url", "")
    except importlib.metadata.PackageNotFoundError:
        url = ""
    candidates = [Path(__file__).resolve().parents[4]]  # <root>/packages/core/src/reap/plugins.py
    if url.startswith("file:"):
        candidates.insert(0, Path(urllib.request.url2pathname(urllib.parse.urlparse(url).path)).parents[1])
    for root in candidates:
        if (root / PACKAGES["reap-core"][0] / "pyproject.toml").is_file():
            return root
    return None


def _installed(dist: str) -> bool:
    try:
        importlib.metadata.distribution(dist)
    except importlib.metadata.PackageNotFoundError:
        return False
    return True


def install_command(dist: str, *, reinstall: bool = False) -> str:
    """How to install ``dist`` from where the user stands, as a sentence's end.

    reap's packages are installed from their folders: by absolute path when reap-core came from
    a clone on this machine, else as ``./packages/...`` in a clone. ``--no-sources`` keeps uv
    from installing the workspace's packages editable. Other distributions come from the registry.

    Examples:
        >>> install_command("some-plugin")
        '`uv pip install some-plugin`'
    """
    if dist not in PACKAGES:
        return f"`uv pip install {'--reinstall-package ' + dist + ' ' if reinstall else ''}{dist}`"
    root = repository()
    wanted = [*(d for d in PACKAGES[dist][1] if not reinstall and not _installed(d)), dist]
    folders = [PACKAGES[d][0] for d in wanted]
    if root is not None and all((root / f / "pyproject.toml").is_file() for f in folders):
        paths, where = [str(root / f) for f in folders], ""
    else:
        paths, where = [f"./{f}" for f in folders], " in a clone of reap's repository"
    flags = f"--no-sources --reinstall-package {dist}" if reinstall else "--no-sources"
    return f"`uv pip install {flags} {' '.join(paths)}`{where}"


@dataclass
class PluginInfo:
    """One loaded (or failed) plugin, as ``reap plugins`` prints it."""

    name: str
    distribution: str
    version: str
    error: str | None = None
    provides: list[str] = field(default_factory=list)


class Registries:
    """Everything the plugins registered, keyed by name."""

    def __init__(self, pm: pluggy.PluginManager, infos: list[PluginInfo]):
        self.pm = pm
        self.plugins = infos
        self.backends: dict[str, CollectorBackend] = {}
        self.weight_sync_schemes: dict[str, WeightSyncSchemeEntry] = {}
        self.recurrent_backends: dict[str, RecurrentBackend] = {}
        self.exports: dict[str, str] = {}
        #: ``{module: {name: target}}``: the TorchRL-mirrored modules each name is exported from.
        self.export_modules: dict[str, dict[str, str]] = {}
        by_module = {info.name: info for info in infos}
        for plugin in pm.get_plugins():
            info = by_module.get(pm.get_name(plugin))
            self._collect(plugin, info)

    def _collect(self, plugin, info: PluginInfo | None) -> None:
        def adder(table, kind):
            def register(entry):
                table[entry.name] = entry
                if info is not None:
                    info.provides.append(f"{kind} {entry.name!r}")

            return register

        def export(name, target, *, modules=()):
            if isinstance(modules, str):
                raise TypeError(f"register({name!r}, ...): modules must be a tuple of module names, "
                                f"got the string {modules!r}; pass modules=({modules!r},)")
            for module in modules:
                if not module.startswith("reap."):
                    raise ValueError(f"register({name!r}, ...): module {module!r} is not under "
                                     "'reap.'; name TorchRL's path with 'torchrl' replaced by 'reap'")
                self.export_modules.setdefault(module, {})[name] = target
            self.exports[name] = target
            if info is not None:
                info.provides.append(f"name {name}")

        calls = {
            "reap_register_collector_backends": adder(self.backends, "backend"),
            "reap_register_weight_sync_schemes": adder(self.weight_sync_schemes, "weight sync"),
            "reap_register_recurrent_backends": adder(self.recurrent_backends, "recurrent"),
            "reap_register_exports": export,
        }
        for hook_name, register in calls.items():
            impl = getattr(plugin, hook_name, None)
            if impl is not None:
                impl(register=register)


def _disabled_names() -> set[str]:
    raw = os.environ.get("REAP_DISABLE_PLUGINS", "")
    return {name.strip() for name in raw.split(",") if name.strip()}


@functools.cache
def get_registries() -> Registries:
    """Build the plugin manager and the registries (once per process)."""
    pm = pluggy.PluginManager("reap")
    pm.add_hookspecs(hookspecs)
    infos: list[PluginInfo] = []
    autoload = os.environ.get("REAP_DISABLE_PLUGIN_AUTOLOAD", "") in ("", "0")
    disabled = _disabled_names()
    for ep in importlib.metadata.entry_points(group=ENTRY_POINT_GROUP):
        builtin = ep.value.startswith("reap.")
        if ep.name in disabled or not (autoload or builtin):
            continue
        dist = ep.dist.name if ep.dist else "?"
        version = ep.dist.version if ep.dist else "?"
        info = PluginInfo(ep.name, dist, version)
        infos.append(info)
        try:
            module = ep.load()
        except Exception as exc:  # a broken plugin is reported, not fatal
            info.error = "".join(traceback.format_exception_only(exc)).strip()
            warnings.warn(
                f"reap plugin {ep.name!r} from {dist} failed to load and is skipped: "
                f"{info.error}. Reinstall it with {install_command(dist, reinstall=True)}.",
                RuntimeWarning,
                stacklevel=2,
            )
            continue
        if pm.get_plugin(ep.name) is None:
            pm.register(module, name=ep.name)
    if pm.get_plugin("local") is None:  # core's built-ins, even when not installed as a dist
        from reap import builtin

        pm.register(builtin, name="local")
        infos.append(PluginInfo("local", "reap-core", _core_version()))
    return Registries(pm, infos)


def _core_version() -> str:
    from reap import __version__

    return __version__


def hook():
    """The relay of lifecycle hooks: ``hook().reap_batch_ready(collector=c, batch=b)``."""
    return get_registries().pm.hook


def _missing(kind: str, name: str, available) -> PluginNotInstalledError:
    dist = KNOWN_PROVIDERS.get(name)
    hint = (f"{dist} provides it: install it with {install_command(dist)}" if dist
            else "install the plugin that provides it")
    return PluginNotInstalledError(
        f"no {kind} named {name!r} is installed; {hint}. Installed: {sorted(available) or 'none'}."
    )


def collector_backends() -> dict[str, CollectorBackend]:
    """Registered collector backends by name."""
    return get_registries().backends


def get_collector_backend(name: str) -> CollectorBackend:
    """The backend ``name``, or an error naming the package to install."""
    table = collector_backends()
    if name not in table:
        raise _missing("collector backend", name, table)
    return table[name]


def get_weight_sync_scheme(name: str) -> WeightSyncSchemeEntry:
    """The weight-sync scheme ``name``, or an error naming the package to install."""
    table = get_registries().weight_sync_schemes
    if name not in table:
        raise _missing("weight-sync scheme", name, table)
    return table[name]


def get_recurrent_backend(name: str) -> RecurrentBackend:
    """The recurrent backend ``name``, or an error naming the package to install."""
    table = get_registries().recurrent_backends
    if name not in table:
        raise _missing("recurrent backend", name, table)
    return table[name]


def resolve_export(name: str):
    """The object behind a public name registered by a plugin (``from reap import NAME``)."""
    target = get_registries().exports.get(name)
    if target is None:
        dist = KNOWN_PROVIDERS.get(name)
        if dist is None:
            raise AttributeError(f"module 'reap' has no attribute {name!r}")
        from reap.mirror import not_loaded_error

        raise not_loaded_error(name, dist)
    module_name, _, attribute = target.partition(":")
    return getattr(importlib.import_module(module_name), attribute)
