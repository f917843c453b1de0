"""TorchRL's module paths under ``reap``: ``from reap.data.replay_buffers import SliceSampler``.

Each plugin declares, through ``reap_register_exports``, the modules its public names live in
(``register(name, "module:attribute", modules=("reap.data", ...))``: TorchRL's path with
``torchrl`` replaced by ``reap``). This module makes those paths importable: real reap modules
(``reap.collectors``, ``reap.envs``, ``reap.weight_update``) get a module ``__getattr__`` from
:func:`module_getattr`, and the others (``reap.data``, ``reap.objectives.value``, ...) are created
on first import by a meta-path finder, as empty packages whose attributes resolve the same way.

Names of core resolve without loading any plugin; other names load the plugins once, as
``from reap import NAME`` does. A name whose package is not installed raises
:class:`~reap.plugins.PluginNotInstalledError` naming the package, from the generated table
:data:`reap.export_hints.EXPORT_HINTS`; a name TorchRL has at that path and reap does not
(:data:`reap.export_hints.TORCHRL_ONLY`) raises :class:`NotInReapError` naming TorchRL's import.

Examples:
    >>> from reap.envs.utils import ExplorationType
    >>> from reap._utils import compile_with_warmup
    >>> import reap.data
    >>> reap.data.__name__, reap.data.__path__
    ('reap.data', [])
"""

from __future__ import annotations

import functools
import importlib
import importlib.abc
import importlib.machinery
import importlib.metadata
import inspect
import sys
import threading
import types

_PREFIX = "reap."


@functools.cache
def core_exports() -> dict[str, dict[str, str]]:
    """``{module: {name: target}}`` of reap-core's own names (no plugin is loaded)."""
    builtin = importlib.import_module("reap.builtin")  # not `from reap import`: reap.__getattr__
    table: dict[str, dict[str, str]] = {}
    builtin.reap_register_exports(register=_into(table))
    return table


def _into(table: dict[str, dict[str, str]]):
    def register(name: str, target: str, *, modules=()):
        for module in modules:
            table.setdefault(module, {})[name] = target

    return register


def _hints() -> dict[str, tuple[str, tuple[str, ...]]]:
    from reap.export_hints import EXPORT_HINTS

    return EXPORT_HINTS


@functools.cache
def _torchrl_only() -> dict[str, frozenset[str]]:
    from reap.export_hints import TORCHRL_ONLY

    return {module: frozenset(names) for module, names in TORCHRL_ONLY.items()}


class NotInReapError(ImportError):
    """A name TorchRL has at a module path reap mirrors, which reap does not provide."""


@functools.cache
def _static_modules() -> frozenset[str]:
    """Mirrored modules known without loading plugins (core's, and every package's in the table)."""
    modules = set(core_exports())
    for _, where in _hints().values():
        modules.update(where)
    return frozenset(_with_parents(modules))


def _with_parents(modules) -> set[str]:
    out = set()
    for module in modules:
        parts = module.split(".")
        out.update(".".join(parts[:i]) for i in range(2, len(parts) + 1))
    return out


def _registered() -> dict[str, dict[str, str]]:
    from reap.plugins import get_registries

    return get_registries().export_modules


_guard = threading.local()


def is_mirrored(module: str) -> bool:
    """Whether ``module`` (``"reap.data"``) is a mirrored module path."""
    if module in _static_modules():
        return True
    if getattr(_guard, "active", False):  # a plugin being loaded imports a missing reap module
        return False
    _guard.active = True
    try:
        return module in _with_parents(_registered())
    finally:
        _guard.active = False


def resolve(module: str, name: str):
    """The object ``name`` of mirrored module ``module``, or an error naming what to install."""
    if name.startswith("__") and name != "__all__":
        raise AttributeError(f"module {module!r} has no attribute {name!r}")
    if name == "__all__":
        return sorted({**core_exports().get(module, {}), **_registered().get(module, {})})
    target = core_exports().get(module, {}).get(name) or _registered().get(module, {}).get(name)
    if target is None:
        child = f"{module}.{name}"
        if is_mirrored(child):
            return importlib.import_module(child)
        hint = _hints().get(name)
        if hint is not None and module in hint[1]:
            raise not_loaded_error(name, hint[0])
        if name in _torchrl_only().get(module, ()):
            theirs = "torchrl" + module.removeprefix("reap")
            raise NotInReapError(f"{name} is TorchRL's ({theirs}); reap does not provide it: "
                                 f"use `from {theirs} import {name}`.")
        raise AttributeError(f"module {module!r} has no attribute {name!r}")
    module_name, _, attribute = target.partition(":")
    return getattr(importlib.import_module(module_name), attribute)


def not_loaded_error(name: str, dist: str):
    """The error for ``name``, whose package ``dist`` is not installed or its plugin not loaded."""
    from reap.plugins import PluginNotInstalledError, install_command

    try:
        importlib.metadata.distribution(dist)
    except importlib.metadata.PackageNotFoundError:
        return PluginNotInstalledError(
            f"{name} is provided by {dist}, which is not installed; install it with {install_command(dist)}."
        )
    return PluginNotInstalledError(
        f"{name} is provided by {dist}, which is installed but its reap plugin is not loaded "
        "(REAP_DISABLE_PLUGINS / REAP_DISABLE_PLUGIN_AUTOLOAD, or it failed to load: run "
        f"`reap plugins`); reinstall it with {install_command(dist, reinstall=True)}."
    )


def module_getattr(module: str):
    """A module ``__getattr__`` for a real reap module that is also a mirrored path."""
    return functools.partial(resolve, module)


class _MirrorLoader(importlib.abc.Loader):
    def create_module(self, spec):
        module = types.ModuleType(spec.name, f"TorchRL's {spec.name.replace('reap', 'torchrl', 1)}, mirrored by reap.")
        module.__path__ = []  # a package: its mirrored submodules import through this finder
        module.__getattr__ = module_getattr(spec.name)
        return module

    def exec_module(self, module):
        pass


class MirrorFinder(importlib.abc.MetaPathFinder):
    """Creates the mirrored modules that have no file (``reap.data``, ``reap._utils``, ...).

    ``import reap`` puts one last on ``sys.meta_path`` (:func:`install`); it answers only for
    module names under ``reap.`` that a plugin, core or the hint table declares.

    Examples:
        >>> import importlib.util
        >>> importlib.util.find_spec("reap.objectives.value.functional").name
        'reap.objectives.value.functional'
    """

    def find_spec(self, fullname, path=None, target=None):
        if not fullname.startswith(_PREFIX) or not is_mirrored(fullname):
            return None
        return importlib.machinery.ModuleSpec(fullname, _MirrorLoader(), is_package=True)


def install() -> None:
    """Put the finder last on ``sys.meta_path`` (real modules are always found first)."""
    if not any(isinstance(finder, MirrorFinder) for finder in sys.meta_path):
        sys.meta_path.append(MirrorFinder())


def torchrl_names(module) -> set[str]:
    """A TorchRL module's public names: its ``__all__``, or without one, the classes and
    functions defined in it or below it (not those it imports, such as ``libs.gym``'s specs).

    What :data:`reap.export_hints.TORCHRL_ONLY` is generated from, with TorchRL installed.
    """
    if hasattr(module, "__all__"):
        return set(module.__all__)
    return {name for name, obj in vars(module).items() if not name.startswith("_")
            and (inspect.isclass(obj) or inspect.isfunction(obj))
            and getattr(obj, "__module__", "").startswith(module.__name__)}


def plugin_exports() -> dict[str, dict[str, tuple[str, ...]]]:
    """``{distribution: {name: modules}}`` registered by each loaded plugin but core's.

    What :data:`reap.export_hints.EXPORT_HINTS` is generated from
    (``tools/update_export_hints.py``).
    """
    from reap.plugins import get_registries

    registries = get_registries()
    dists = {info.name: info.distribution for info in registries.plugins}
    out: dict[str, dict[str, tuple[str, ...]]] = {}
    for plugin in registries.pm.get_plugins():
        dist = dists.get(registries.pm.get_name(plugin))
        impl = getattr(plugin, "reap_register_exports", None)
        if dist is None or dist == "reap-core" or impl is None:
            continue
        names = out.setdefault(dist, {})

        def register(name, target, *, modules=(), names=names):
            names[name] = tuple(sorted({*names.get(name, ()), *modules}))

        impl(register=register)
    return out
