"""TorchRL's modules and losses take reap's specs as their own.

Why: TorchRL checks the specs it is given by class. ``SafeModule`` and ``QValueModule`` test
``isinstance(spec, TensorSpec)`` / ``isinstance(spec, Composite)``, and ``DQNLoss`` or
``QValueModule`` look the action space up as ``ACTION_SPACE_MAP[type(spec)]``; a reap spec failed
both (``TypeError: unhashable type: 'Categorical'``). TorchRL's spec classes are ``abc`` classes,
so :func:`register` makes each reap spec class a virtual subclass of its TorchRL namesake and
adds the discrete ones to that map; reap's specs carry the methods those modules call
(``rand``, ``is_in``, ``project``, ``expand``, ``index``, ``to_one_hot``, ...).

Importing TorchRL takes seconds, so reap never imports it: :func:`install` (run by ``import
reap``) registers at once when ``torchrl.data`` is already imported, and otherwise right after
``torchrl.data`` is first imported, through a one-shot import hook.
"""

from __future__ import annotations

import sys
import warnings

_TARGET = "torchrl.data"
_CLASSES = (
    "TensorSpec", "Unbounded", "UnboundedContinuous", "UnboundedDiscrete", "Bounded", "BoundedContinuous",
    "BoundedDiscrete", "Categorical", "OneHot", "Binary", "MultiOneHot", "MultiCategorical", "Composite",
    "Stacked", "StackedComposite",
)
_ACTION_SPACES = ("Categorical", "OneHot", "Binary", "MultiOneHot", "MultiCategorical")


def register() -> None:
    """Make reap's spec classes virtual subclasses of TorchRL's, and known action spaces."""
    from torchrl.data import tensor_specs as theirs
    from torchrl.data.utils import ACTION_SPACE_MAP

    from reap import specs as ours

    for name in _CLASSES:
        getattr(theirs, name).register(getattr(ours, name))
    for name in _ACTION_SPACES:
        ACTION_SPACE_MAP.setdefault(getattr(ours, name), ACTION_SPACE_MAP[getattr(theirs, name)])


def _register_after_import() -> None:
    try:
        register()
    except Exception as exc:  # a TorchRL whose layout changed: TorchRL itself must still import
        warnings.warn(f"reap: TorchRL's modules will not take reap's specs as they are ({exc!r}); "
                      "pass spec.to_torchrl()", stacklevel=2)


class _AfterImport:
    """A meta-path finder that finds nothing itself: it lets the other finders locate
    ``torchrl.data`` and makes its loader call :func:`register` once the module has run."""

    def find_spec(self, name, path=None, target=None):
        if name != _TARGET:
            return None
        sys.meta_path.remove(self)
        for finder in sys.meta_path:
            find = getattr(finder, "find_spec", None)
            spec = None if find is None else find(name, path, target)
            if spec is not None:
                break
        else:
            return None
        exec_module = spec.loader.exec_module

        def exec_then_register(module):
            exec_module(module)
            _register_after_import()

        spec.loader.exec_module = exec_then_register
        return spec


def install() -> None:
    """Register now if ``torchrl.data`` is imported, else once it is (idempotent)."""
    if _TARGET in sys.modules:
        _register_after_import()
    elif not any(isinstance(finder, _AfterImport) for finder in sys.meta_path):
        sys.meta_path.insert(0, _AfterImport())
