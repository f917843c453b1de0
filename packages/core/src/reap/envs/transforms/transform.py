"""``Transform``: TorchRL's transform protocol, plus the array hooks reap's own transforms add.

A transform is an ``nn.Module`` (it has buffers and a ``state_dict``, ``nn.Sequential(t)`` runs
it) with TorchRL's hooks: ``_apply_transform`` (one tensor), ``_call`` (a step's ``"next"``
TensorDict), ``_step`` (root and next), ``_reset``, ``_inv_apply_transform``/``_inv_call`` (the
input of a step: the action), ``forward``/``t(td)`` (outside an env: a replay buffer, a model),
``inv`` and the spec hooks ``transform_observation_spec``, ``transform_reward_spec``,
``transform_done_spec``, ``transform_action_spec``, ``transform_state_spec``,
``transform_output_spec`` and ``transform_input_spec``. A subclass written for TorchRL runs in a
reap ``TransformedEnv`` as it is, through these hooks on TensorDict views of the step arrays.

reap's own transforms also act on the collector's step arrays in place (``_array_hooks``):
``on_reset(root, t, mask)``, ``on_step(root, nxt, t)`` and, for transforms that act on the
action, ``on_action(root, t)``; ``_attach(env)`` checks them against the env. The env runs these
when the transform's class is the one that defines them; a subclass that overrides one of
TorchRL's hooks runs through its TorchRL hooks instead. Layout hooks (how arrays are shared along
the chain): ``replaced_keys()`` (entries given a new array), ``replaced_inputs()`` (the same, on
the root only), ``reads_inputs()`` (entries read as they were before, under ``("in", key)``),
``key_moves()`` (``{new: old}``: an entry shown under a new name, no copy) and
``passthrough_keys()`` (carried entries whose ``"next"`` value is the root's unless the policy
writes it).

Examples:
    >>> import torch
    >>> from tensordict import TensorDict
    >>> from reap.envs.transforms import Transform
    >>> class AddOne(Transform):
    ...     def _apply_transform(self, obs):
    ...         return obs + 1
    >>> AddOne(in_keys=["obs"], out_keys=["obs_plus"])(TensorDict(obs=torch.zeros(2)))["obs_plus"]
    tensor([1., 1.])
"""

from __future__ import annotations

import weakref
from contextlib import contextmanager
from copy import copy
from functools import wraps

import numpy as np
import torch
from tensordict import TensorDictBase, unravel_key
from tensordict.nn import dispatch
from torch import nn
from torch.utils._pytree import tree_map

FORWARD_NOT_IMPLEMENTED = "class {} cannot be executed without a parent environment."


def keys_list(value, owner: str, what: str):
    """``value`` as a list of keys (a string or a tuple of strings each), as TorchRL takes them."""
    if value is None:
        return None
    if isinstance(value, str) or (isinstance(value, tuple) and value):  # () is no keys, as TorchRL's
        value = [value]
    try:
        return [unravel_key(key) for key in value]
    except (TypeError, ValueError) as err:
        raise TypeError(f"{owner}: {what} must be keys (strings or tuples of strings), got {value!r}") from err


@contextmanager
def missing_tolerance(transform: Transform, mode: bool = True):
    """Within the block, ``transform`` skips absent in_keys instead of raising (TorchRL's reset)."""
    before = transform._missing_tolerance
    transform.set_missing_tolerance(mode)
    try:
        yield
    finally:
        transform.set_missing_tolerance(before)


def write_rows(dest: np.ndarray, value, mask) -> None:
    """``dest[...] = value`` in the rows of ``mask`` (all rows when None or a scalar mask)."""
    if mask is None or mask.ndim == 0:
        np.copyto(dest, value, casting="unsafe")
    else:
        dest[mask] = value[mask]


def reset_flags(tensordict) -> torch.Tensor:
    """The batch-shaped reset flags of a reset's input (``"_reset"``; all True when absent)."""
    reset = tensordict.get("_reset", None)
    if reset is None:
        return torch.ones((), dtype=torch.bool, device=tensordict.device).expand(tensordict.batch_size)
    if reset.ndim > tensordict.ndim:
        reset = reset.flatten(tensordict.ndim, -1).any(-1)
    return reset


def expand_right(flags: torch.Tensor, like: torch.Tensor) -> torch.Tensor:
    """``flags`` (batch-shaped) with trailing dims added and expanded to ``like``'s shape."""
    return flags.reshape(*flags.shape, *([1] * (like.ndim - flags.ndim))).expand(like.shape)


def apply_to_composite(hook):
    """TorchRL's rule for the spec hooks of keyed transforms: on a Composite, the spec of each
    in_key goes through ``hook`` into out_key; a leaf spec goes through it as it is."""
    @wraps(hook)
    def on_spec(self, spec):
        from reap.specs import Composite

        if not isinstance(spec, Composite):
            return hook(self, spec)
        for in_key, out_key in zip(self.in_keys, self.out_keys, strict=True):
            if in_key in spec.keys(True, True):
                spec[out_key] = hook(self, spec[in_key].clone())
        return spec
    return on_spec


def apply_to_composite_inv(hook):
    """The same for the input side: in_keys_inv (inside) go through ``hook`` into out_keys_inv
    (what the outside sees), the inside entry removed when renamed; given a whole input spec, in
    its action and state specs."""
    @wraps(hook)
    def on_spec(self, spec):
        inner = spec.keys()
        parts = [spec[k] for k in ("full_action_spec", "full_state_spec") if k in inner] or [spec]
        for part in parts:
            for in_key, out_key in zip(self.in_keys_inv, self.out_keys_inv, strict=True):
                if in_key in part.keys(True, True):
                    part[out_key] = hook(self, part[in_key].clone())
                    if in_key != out_key:
                        del part[in_key]
        return spec
    return on_spec


class Transform(nn.Module):
    """Base of the transforms: does nothing; subclasses override what they need (see the module).

    Args:
        in_keys, out_keys: the entries read and written by ``_call``/``forward``.
        in_keys_inv, out_keys_inv: the entries of a step's input (the action) that ``inv`` maps.
    """

    invertible = False
    enable_inv_on_reset = False
    _array_hooks = False  # this class's on_reset/on_step do what its TorchRL hooks do
    _array_inverse = False  # ... and its on_action what its inverse hooks do

    def __init__(self, in_keys=None, out_keys=None, in_keys_inv=None, out_keys_inv=None):
        super().__init__()
        if in_keys is not None:
            self.in_keys = in_keys
        if out_keys is not None:
            self.out_keys = out_keys
        if in_keys_inv is not None:
            self.in_keys_inv = in_keys_inv
        if out_keys_inv is not None:
            self.out_keys_inv = out_keys_inv
        self._missing_tolerance = False
        # kept out of nn.Module's registries: the env is no submodule of its transform
        self.__dict__["_container"] = None
        self.__dict__["_parent"] = None
        self._bind_buffers()

    # ---- NumPy views of the buffers, for the array hooks -------------------------------------
    def _bind_buffers(self) -> None:
        """``self._np_buffers``: a NumPy view of each CPU buffer (None for others), refreshed
        whenever a buffer is set, moved or materialised, so the array hooks read them for free."""
        views = {}
        for name, tensor in self.__dict__.get("_buffers", {}).items():
            usable = isinstance(tensor, torch.Tensor) and not isinstance(tensor, nn.parameter.UninitializedBuffer)
            views[name] = tensor.detach().numpy() if usable and tensor.device.type == "cpu" else None
        self.__dict__["_np_buffers"] = views

    def __setattr__(self, name, value) -> None:
        super().__setattr__(name, value)
        if name in self.__dict__.get("_buffers", ()):
            self._bind_buffers()

    def register_buffer(self, name, tensor, persistent: bool = True) -> None:
        super().register_buffer(name, tensor, persistent)
        self._bind_buffers()

    def _apply(self, fn, recurse=True):
        out = super()._apply(fn, recurse)
        self._bind_buffers()
        return out

    # ---- keys (TorchRL: a key or a list of keys, nested keys as tuples; [] when unset) ------
    @property
    def in_keys(self) -> list:
        return self.__dict__.get("_in_keys") or []

    @in_keys.setter
    def in_keys(self, value) -> None:
        self.__dict__["_in_keys"] = keys_list(value, type(self).__name__, "in_keys")

    @property
    def out_keys(self) -> list:
        return self.__dict__.get("_out_keys") or []

    @out_keys.setter
    def out_keys(self, value) -> None:
        self.__dict__["_out_keys"] = keys_list(value, type(self).__name__, "out_keys")

    @property
    def in_keys_inv(self) -> list:
        return self.__dict__.get("_in_keys_inv") or []

    @in_keys_inv.setter
    def in_keys_inv(self, value) -> None:
        self.__dict__["_in_keys_inv"] = keys_list(value, type(self).__name__, "in_keys_inv")

    @property
    def out_keys_inv(self) -> list:
        return self.__dict__.get("_out_keys_inv") or []

    @out_keys_inv.setter
    def out_keys_inv(self, value) -> None:
        self.__dict__["_out_keys_inv"] = keys_list(value, type(self).__name__, "out_keys_inv")

    @property
    def missing_tolerance(self) -> bool:
        return self._missing_tolerance

    def set_missing_tolerance(self, mode: bool = False) -> None:
        """When True, absent in_keys are skipped instead of raising a KeyError."""
        self._missing_tolerance = mode

    # ---- TorchRL's TensorDict hooks ------------------------------------------------------------
    def _apply_transform(self, obs: torch.Tensor) -> torch.Tensor:
        """The transform of one entry (``_call`` and ``forward`` map it over the keys)."""
        raise NotImplementedError(
            f"{type(self).__name__}._apply_transform is not coded; a transform coded in _call runs "
            "in an env, and forward is for use outside one (nn.Modules, replay buffers)"
        )

    def _inv_apply_transform(self, state: torch.Tensor) -> torch.Tensor:
        """The inverse transform of one input entry (the identity unless ``invertible``)."""
        if self.invertible:
            raise NotImplementedError(f"{type(self).__name__}._inv_apply_transform is not coded")
        return state

    def _call(self, next_tensordict: TensorDictBase) -> TensorDictBase:
        """``out_key = _apply_transform(in_key)`` for each pair; run on step and reset outputs."""
        for in_key, out_key in zip(self.in_keys, self.out_keys, strict=True):
            value = next_tensordict.get(in_key, None)
            if value is not None:
                next_tensordict.set(out_key, self._apply_transform(value))
            elif not self.missing_tolerance:
                raise KeyError(f"{self}: '{in_key}' not found in tensordict {next_tensordict}")
        return next_tensordict

    def _step(self, tensordict: TensorDictBase, next_tensordict: TensorDictBase) -> TensorDictBase:
        """A step: ``tensordict`` is the data at t, ``next_tensordict`` at t + 1 (returned)."""
        return self._call(next_tensordict)

    def _reset(self, tensordict: TensorDictBase, tensordict_reset: TensorDictBase) -> TensorDictBase:
        """A reset: ``tensordict`` is the reset's input, ``tensordict_reset`` its output (returned)."""
        return tensordict_reset

    def _inv_call(self, tensordict: TensorDictBase) -> TensorDictBase:
        """The input of a step (action, state) as the env before this transform reads it."""
        for in_key, out_key in zip(self.in_keys_inv, self.out_keys_inv, strict=True):
            value = tensordict.get(out_key, None)
            if value is not None:
                tensordict.set(in_key, self._inv_apply_transform(value))
            elif not self.missing_tolerance:
                raise KeyError(f"'{out_key}' not found in tensordict {tensordict}")
        return tensordict

    def _reset_env_preprocess(self, tensordict):
        """The reset's input, inverted when ``enable_inv_on_reset``."""
        if self.enable_inv_on_reset and tensordict is not None:
            with missing_tolerance(self):
                tensordict = self._inv_call(tensordict)
        return tensordict

    @dispatch(source="in_keys", dest="out_keys")
    def forward(self, tensordict: TensorDictBase) -> TensorDictBase:
        """The transform outside an env (``t(td)``, a replay buffer's sample, ``nn.Sequential``)."""
        for in_key, out_key in zip(self.in_keys, self.out_keys, strict=True):
            value = tensordict.get(in_key, None)
            if value is not None:
                tensordict.set(out_key, self._apply_transform(value))
            elif not self.missing_tolerance:
                raise KeyError(f"'{in_key}' not found in tensordict {tensordict}")
        return tensordict

    @dispatch(source="in_keys_inv", dest="out_keys_inv")
    def inv(self, tensordict: TensorDictBase) -> TensorDictBase:
        """The inverse transform on a shallow copy of ``tensordict`` (a replay buffer's extend)."""
        try:
            tensordict = tensordict.clone(recurse=False)
        except (AttributeError, TypeError):
            tensordict = tree_map(lambda x: x, tensordict)
        return self._inv_call(tensordict)

    def init(self, tensordict) -> None:
        """Runs the transform's init steps (none by default)."""

    def close(self) -> None:
        """Close the transform."""

    def dump(self, **kwargs) -> None:
        """Write what the transform collected (e.g. a video); nothing by default."""

    # ---- specs ---------------------------------------------------------------------------------
    def transform_output_spec(self, output_spec):
        """The env's output spec (observations, reward, done) after this transform."""
        output_spec = output_spec.clone()
        output_spec["full_observation_spec"] = self.transform_observation_spec(output_spec["full_observation_spec"])
        if "full_reward_spec" in output_spec.keys():
            output_spec["full_reward_spec"] = self.transform_reward_spec(output_spec["full_reward_spec"])
        if "full_done_spec" in output_spec.keys():
            output_spec["full_done_spec"] = self.transform_done_spec(output_spec["full_done_spec"])
        known = {key[1:] if len(key) > 2 else key[1] for key in output_spec.keys(True) if isinstance(key, tuple)}
        for key in set(self.out_keys) - set(self.in_keys):
            if key not in known:
                raise KeyError(
                    f"The key '{key}' is unaccounted for by the transform (expected keys {sorted(map(str, known))}). "
                    "Every new entry a transform writes must be registered in the specs: code "
                    "transform_observation_spec (or transform_output_spec, ...) to add it."
                )
        return output_spec

    def transform_input_spec(self, input_spec):
        """The env's input spec (action, state) after this transform."""
        input_spec = input_spec.clone()
        input_spec["full_state_spec"] = self.transform_state_spec(input_spec["full_state_spec"])
        input_spec["full_action_spec"] = self.transform_action_spec(input_spec["full_action_spec"])
        return input_spec

    def transform_observation_spec(self, observation_spec):
        return observation_spec

    def transform_reward_spec(self, reward_spec):
        return reward_spec

    def transform_done_spec(self, done_spec):
        return done_spec

    def transform_action_spec(self, action_spec):
        return action_spec

    def transform_state_spec(self, state_spec):
        return state_spec

    def transform_env_device(self, device):
        return device

    def transform_env_batch_size(self, batch_size):
        return batch_size

    # ---- container and parent ------------------------------------------------------------------
    def set_container(self, container) -> None:
        """Attach the transform to ``container`` (an env or a ``Compose``); one at a time."""
        if self.container is not None:
            raise AttributeError(
                f"parent of transform {type(self)} already set. Call `transform.clone()` to get a "
                "similar transform with no parent set."
            )
        self.__dict__["_container"] = None if container is None else weakref.ref(container)
        self.__dict__["_parent"] = None

    def reset_parent(self) -> None:
        """Forget the container and the parent."""
        self.__dict__["_container"] = None
        self.__dict__["_parent"] = None

    def empty_cache(self) -> None:
        """Forget the parent env built by ``parent`` (built again on next use)."""
        self.__dict__["_parent"] = None

    @property
    def container(self):
        """The env that holds the transform (through any ``Compose``), or None."""
        from reap.envs.base import EnvBase
        from reap.envs.transforms.compose import Compose

        ref = self.__dict__.get("_container")
        container = None if ref is None else ref()
        while container is not None and not isinstance(container, EnvBase):
            if not isinstance(container, Compose):
                raise ValueError("A transform's container must be a Compose or an env")
            ref = container.__dict__.get("_container")
            container = None if ref is None else ref()
        return container

    @property
    def parent(self):
        """The env before this transform: the base env and the transforms preceding it (copies).

        Built on first use and kept until the chain changes (TorchRL's).
        """
        parent = self.__dict__.get("_parent")
        if parent is None:
            env = self.container
            if env is None:
                return None
            parent = env._parent_of(self)
            self.__dict__["_parent"] = parent
        return parent

    @property
    def collector(self):
        """The collector of the container env, when one registered itself."""
        return self.container.collector

    def clone(self) -> Transform:
        """A copy of the transform with no container (tensors and buffers shared, as TorchRL's)."""
        other = copy(self)
        state = copy(self.__dict__)
        for name in ("_parameters", "_buffers", "_modules"):
            state[name] = copy(state[name])
        state["_container"] = None
        state["_parent"] = None
        other.__dict__.update(state)
        return other

    def to(self, *args, **kwargs) -> Transform:
        self.empty_cache()
        return super().to(*args, **kwargs)

    def __getstate__(self):
        state = self.__dict__.copy()
        ref = state.get("_container")
        state["_container"] = None if ref is None else ref()
        state["_parent"] = None
        state["_np_buffers"] = {}  # views of the buffers: made again after unpickling
        return state

    def __setstate__(self, state):
        container = state.get("_container")
        state["_container"] = None if container is None else weakref.ref(container)
        self.__dict__.update(state)
        self._bind_buffers()

    def __repr__(self) -> str:
        return f"{type(self).__name__}(keys={self.in_keys})"

    # ---- reap's array hooks (see the module docstring) ----------------------------------------
    def _bind(self) -> None:
        """Before ``_attach``: the (in_key, out_key) pairs and buffer views the hooks read."""
        self._pairs = list(zip(self.in_keys, self.out_keys))
        self._bind_buffers()

    def _attach(self, env) -> None:
        """Called when ``env`` (holding the chain up to this transform) builds its arrays."""

    def on_reset(self, root: dict, t: int, mask) -> None:
        pass

    def on_step(self, root: dict, nxt: dict, t: int) -> None:
        pass

    def on_action(self, root: dict, t: int) -> None:
        pass

    def replaced_keys(self) -> tuple:
        return ()

    def replaced_inputs(self) -> tuple:
        return ()

    def reads_inputs(self) -> tuple:
        return ()

    def key_moves(self) -> dict:
        return {}

    def passthrough_keys(self) -> tuple:
        return ()

    def _check_in_keys(self, env) -> None:
        """Check the in_keys against what ``env`` produces (reap checks at construction).

        None produced: the transform has nothing to act on and does nothing, as in TorchRL, with
        a warning (``NoInKeys``, which the env catches). Some produced: the env is built, its specs
        transformed, and its resets and steps raise a KeyError (``FailsWhenRun``; TorchRL's reset
        skips the absent keys, its first step raises).
        """
        produced = {*env.root_specs(), *env.next_specs()}
        missing = [key for key in self.in_keys if key not in produced]
        if not missing:
            return
        shown = sorted(str(k) for k in produced if not (isinstance(k, str) and k.startswith("_hidden:")))
        if len(missing) == len(self.in_keys):
            raise NoInKeys(f"{type(self).__name__}: none of its in_keys {missing} is produced by the env (it has "
                           f"{shown}), so it does nothing; drop it or give it the env's keys")
        raise FailsWhenRun(KeyError(f"{type(self).__name__}: in_keys {missing} are not produced by the env (it "
                                    f"has {shown}); its resets and steps raise this KeyError"))


class ObservationTransform(Transform):
    """Base of transforms of observations (TorchRL's): ``in_keys`` default to ``["observation",
    "pixels"]``.

    Examples:
        >>> import torch
        >>> from tensordict import TensorDict
        >>> class Halve(ObservationTransform):
        ...     def _apply_transform(self, obs):
        ...         return obs / 2
        >>> Halve(out_keys=["half", "half_pixels"])(TensorDict(observation=torch.ones(1), pixels=torch.ones(1)))["half"]
        tensor([0.5000])
    """

    def __init__(self, in_keys=None, out_keys=None, in_keys_inv=None, out_keys_inv=None):
        super().__init__(in_keys=["observation", "pixels"] if in_keys is None else in_keys, out_keys=out_keys,
                         in_keys_inv=in_keys_inv, out_keys_inv=out_keys_inv)


class NoInKeys(Exception):
    """Raised by ``_check_in_keys`` when no in_key is produced: the env keeps the transform inert."""


class FailsWhenRun(Exception):
    """Raised by ``_attach`` for an env TorchRL builds but cannot run: the env is built, with a
    warning, and its resets and steps raise ``error`` (TorchRL's raise at the first reset or step).
    """

    def __init__(self, error: Exception):
        super().__init__(str(error))
        self.error = error


_TORCHRL_HOOKS = (
    "_apply_transform", "_inv_apply_transform", "_call", "_inv_call", "_step", "_reset", "forward",
    "transform_output_spec", "transform_input_spec", "transform_observation_spec", "transform_reward_spec",
    "transform_done_spec", "transform_action_spec", "transform_state_spec",
)


def runs_on_arrays(transform: Transform) -> bool:
    """Whether the env runs ``transform``'s array hooks (else its TorchRL hooks, on TensorDicts).

    The array hooks stand for the TorchRL hooks of the class that defines them: a subclass that
    overrides a TorchRL hook (or an inverse on a class without array inverses) runs its hooks.
    """
    cls = type(transform)
    owner = next((c for c in cls.__mro__ if "_array_hooks" in c.__dict__), Transform)
    if not owner._array_hooks or transform.__dict__.get("_tensordict_hooks_only"):  # set by its _attach
        return False
    if transform.in_keys_inv and not owner._array_inverse:
        return False
    return all(getattr(cls, name) is getattr(owner, name) for name in _TORCHRL_HOOKS)
