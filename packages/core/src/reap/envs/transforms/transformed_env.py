"""``TransformedEnv``: an env whose steps pass through transforms, in place on the step arrays.

The base env writes each step into the collector's preallocated arrays; then each transform
acts on them in place (``on_reset``/``on_step``), renaming, hiding and reshaping entries without
copies where it can (see ``layout``). Before a step, transforms that act on the action map it
back (``on_action``), last one first. A transform that only has TorchRL's hooks runs on
TensorDict views of the arrays (``torchrl_hooks``).

As in TorchRL, ``transform`` is the transform given (a ``Compose`` once more are added), a
``Compose`` of it is live (``env.transform.append(t)`` rebuilds the env), each transform's
``parent`` is the env before it and ``container`` this env; nesting a ``TransformedEnv`` in
another unwraps it (``auto_unwrap=False`` keeps it). Specs are those the transforms' spec hooks
make; set them on the base env, not here.

A base env with done flags in nested groups (multi-agent envs, reset one group at a time, which
the step arrays' per-env reset cannot say) or heterogeneous (lazy-stacked) entries (which no
array can hold) steps as TorchRL's ``TransformedEnv`` does instead: the base env's
``_reset``/``step``, then each transform's TorchRL hooks (``_reset``, ``_step``, ``inv``) on the
TensorDicts. The collectors drive such envs one TensorDict per step anyway.

Examples:
    >>> from reap.envs import GymEnv
    >>> from reap.envs.transforms import RenameTransform, StepCounter, TransformedEnv
    >>> env = TransformedEnv(GymEnv("Pendulum-v1"), StepCounter(max_steps=2))
    >>> env = env.append_transform(RenameTransform(["observation"], ["obs"]))
    >>> sorted(env.reset().keys())
    ['done', 'obs', 'step_count', 'terminated', 'truncated']
    >>> env.transform[0].parent.transform
    Compose()
"""

from __future__ import annotations

import warnings
from collections import OrderedDict

from reap.envs.base import EnvBase
from reap.envs.done import complete_done
from reap.envs.transforms.compose import Compose, as_transform
from reap.envs.transforms.layout import Layout
from reap.envs.transforms.torchrl_hooks import TensorDictHooks
from reap.envs.transforms.transform import FailsWhenRun, NoInKeys, Transform, runs_on_arrays
from reap.envs.transforms.unwrap import auto_unwrap_transformed_env
from reap.specs.non_tensor import holds_non_tensor
from reap.specs.stacked import Stacked, StackedComposite


def leaves_of(transform: Transform):
    """The transforms of a chain in order, ``Compose``s flattened."""
    if isinstance(transform, Compose):
        for t in transform:
            yield from leaves_of(t)
    else:
        yield transform


def _inverts(transform: Transform, on_arrays: bool) -> bool:
    if on_arrays:
        return bool(transform.in_keys_inv)
    return bool(transform.in_keys_inv) or type(transform)._inv_call is not Transform._inv_call


class _RaisingHooks:
    """The hooks of a transform the env cannot run (``FailsWhenRun``): resets and steps raise."""

    def __init__(self, error: Exception):
        self.error = error

    def _raise(self, *_) -> None:
        raise type(self.error)(*self.error.args)

    on_reset = on_step = on_action = _raise


class TransformedEnv(EnvBase):
    """An env whose steps pass through ``transform`` (one, a ``Compose`` or a callable).

    Args:
        base_env: the env to transform (also as ``base_env=``).
        transform: a ``Transform``, a ``Compose`` or a callable ``td -> td``; more can be added
            with ``append_transform``/``insert_transform``.
        cache_specs: TorchRL's switch; reap recomputes the specs whenever the chain changes.
        auto_unwrap: a ``TransformedEnv`` given as ``base_env`` is unwrapped (its transforms,
            copied, come first) unless False; None (default) follows
            ``set_auto_unwrap_transformed_env`` (unwrapped unless set False), as TorchRL's.
    """

    def __init__(self, *args, **kwargs):
        base_env, transform, auto_unwrap = _parse_arguments(args, kwargs)
        if not isinstance(base_env, EnvBase):
            hint = " (import it from reap.envs, not torchrl.envs)" if "torchrl" in type(base_env).__module__ else ""
            raise TypeError(f"TransformedEnv: base_env must be a reap EnvBase{hint}, got {type(base_env).__name__}")
        if auto_unwrap is None:
            auto_unwrap = auto_unwrap_transformed_env()
        if type(base_env) is TransformedEnv and type(self) is TransformedEnv and auto_unwrap:
            inner = [t.clone() for t in leaves_of(base_env.transform)]
            outer = [] if transform is None else list(leaves_of(as_transform(transform, "TransformedEnv")))
            for t in outer:
                t.reset_parent()
            transform, base_env = Compose(*inner, *outer), base_env.base_env
        super().__init__(batch_size=base_env.batch_size, device=base_env.device)
        self.base_env = base_env
        self._step_mask = None  # the envs a partial step steps (see _partial_step_into)
        self.__dict__["_transform"] = None
        self.transform = Compose() if transform is None else transform

    # ---- the chain ---------------------------------------------------------------------------------
    @property
    def transform(self) -> Transform:
        return self.__dict__["_transform"]

    @transform.setter
    def transform(self, transform) -> None:
        transform = as_transform(transform, "TransformedEnv.transform")
        old = self.__dict__.get("_transform")
        if old is not None:
            old.reset_parent()
        transform.set_container(self)
        transform.eval()
        self.__dict__["_transform"] = transform
        try:
            self._rebuild()
        except Exception:
            transform.reset_parent()
            self.__dict__["_transform"] = old
            if old is not None:
                old.set_container(self)
                self._rebuild()
            raise

    def append_transform(self, transform) -> TransformedEnv:
        """Add ``transform`` (a transform, ``Compose`` or callable) at the end; returns ``self``."""
        transform = as_transform(transform, "TransformedEnv.append_transform")
        self._edit(lambda compose: compose.append(transform))
        return self

    def insert_transform(self, index: int, transform) -> TransformedEnv:
        """Insert ``transform`` at ``index`` of the chain; returns ``self``."""
        transform = as_transform(transform, "TransformedEnv.insert_transform")
        self._edit(lambda compose: compose.insert(index, transform))
        return self

    def _edit(self, edit) -> None:
        """Apply ``edit`` to the chain as a ``Compose``; on an error, put the chain back."""
        if not isinstance(self.transform, Compose):
            single = self.transform
            single.reset_parent()
            self.__dict__["_transform"] = None
            self.transform = Compose(single)
        compose = self.transform
        before = list(compose.transforms)
        try:
            edit(compose)
        except Exception:
            for t in compose.transforms:
                if all(t is not b for b in before):
                    t.reset_parent()
            compose.transforms = type(compose.transforms)(before)
            self._rebuild()
            raise

    def _rebuild(self) -> None:
        """Build the stages and arrays from the base env and the chain (all or nothing)."""
        previous = self.__dict__.get("_layout"), self.__dict__.get("_hooks")
        self.__dict__["_on_tensordicts"] = _needs_tensordicts(self.base_env)
        self._layout = Layout(self.base_env)
        self._hooks: list = []
        self._finish()
        self._commit_specs()
        try:
            for transform in leaves_of(self.transform):
                self._add_stage(transform)
            if not self._torchrl_style and _has_non_tensor(self):  # a transform writes a string, say
                self.__dict__["_on_tensordicts"] = True
            skipping = self.base_env._skips_steps or any(getattr(t, "_skips_steps", False)
                                                         for t in leaves_of(self.transform))
            self.__dict__["_skipping"] = skipping
            if skipping:  # a ConditionalSkip here or below: a skipped step is a TensorDict's to tell
                self.__dict__["_on_tensordicts"] = True
        except Exception:
            self._layout, self._hooks = previous
            if previous[0] is not None:
                self._finish()
                self._commit_specs()
            raise
        finally:
            for transform in leaves_of(self.transform):
                transform.empty_cache()
        self._finish()
        self._commit_specs()
        self.layout_version = self.__dict__.get("layout_version", 0) + 1

    def _add_stage(self, transform: Transform) -> None:
        name = type(transform).__name__
        transform.__dict__["_parent"] = self  # while it joins, this env is the chain before it
        transform._bind()
        failing_hooks = None
        try:
            transform._attach(self)
        except NoInKeys as inert:  # nothing to act on: in the chain, without a stage (TorchRL's no-op)
            warnings.warn(str(inert), UserWarning, stacklevel=4)
            return
        except FailsWhenRun as failing:  # TorchRL builds the env and fails when it runs
            warnings.warn(str(failing), UserWarning, stacklevel=4)
            failing_hooks = _RaisingHooks(failing.error)
        batch = transform.transform_env_batch_size(self.batch_size)
        if batch != self.batch_size:
            raise ValueError(f"{name}: reap envs keep the base env's batch size {tuple(self.batch_size)}; "
                             f"the transform makes it {tuple(batch)}")
        layout = self._layout
        output_spec = transform.transform_output_spec(layout.output_spec.clone())
        input_spec = transform.transform_input_spec(layout.input_spec.clone())
        on_arrays = runs_on_arrays(transform)
        before, actions = layout.stage_keys(len(layout.root.stages) - 1), list(layout.cats["action"])
        layout.add(transform, output_spec, input_spec, on_arrays)
        stage = len(layout.root.stages) - 1
        hooks = transform if on_arrays else TensorDictHooks(
            transform, self.batch_size, before, layout.stage_keys(stage), [*actions, *layout.cats["action"]],
            layout.cats["action"])
        if failing_hooks is not None:
            hooks = failing_hooks
        transform._stage = stage
        self._hooks.append((hooks, stage, _inverts(transform, on_arrays)))
        self._finish()
        self._commit_specs()

    def _finish(self) -> None:
        """Bind what the hot path reads: per stage hooks and views, built once per layout."""
        layout = self._layout
        self._view_cache: dict[int, tuple] = {}
        # per stage, the hooks up to it (the whole chain last), those that do nothing left out
        reset = [(h.on_reset, j) for h, j, _ in self._hooks if type(h).on_reset is not Transform.on_reset]
        step = [(h.on_step, j) for h, j, _ in self._hooks if type(h).on_step is not Transform.on_step]
        stages = range(len(self._hooks) + 1)
        self._reset_chains = [[(f, j) for f, j in reset if j <= s] for s in stages]
        self._step_chains = [[(f, j) for f, j in step if j <= s] for s in stages]
        self._on_action = [(h.on_action, j) for h, j, inverts in reversed(self._hooks) if inverts]
        self._recorded_root_keys = tuple(dict.fromkeys(
            k for h, _, inverts in self._hooks if inverts for k in getattr(h, "recorded", ())))
        self._action_direct = not self._on_action and layout.action_is_base
        self._base_action = layout.base_action_key

    def _parent_of(self, transform: Transform) -> TransformedEnv:
        """The env of the base env and copies of the transforms before ``transform`` (its parent)."""
        before = []
        for t in _nodes(self.transform):
            if t is transform:
                break
            if not isinstance(t, Compose):
                before.append(t.clone())
        return TransformedEnv(self.base_env, Compose(*before), auto_unwrap=False)

    def empty_cache(self) -> None:
        self.transform.empty_cache()
        super().empty_cache()

    # ---- specs as the transforms make them ------------------------------------------------------
    def _commit_specs(self) -> None:
        """The env's specs (``output_spec``, ``input_spec`` and all read from them) are the chain's."""
        layout = self._layout
        self.__dict__["_output_spec"] = layout.output_spec
        self.__dict__["_input_spec"] = layout.input_spec
        self.__dict__["_keys_cache"] = {}
        if self.is_spec_locked:
            layout.output_spec.lock_(recurse=True)
            layout.input_spec.lock_(recurse=True)

    def set_missing_tolerance(self, mode: bool = False) -> None:
        """TorchRL's: the transforms skip absent in_keys (on TensorDicts) instead of raising, when True."""
        self.transform.set_missing_tolerance(mode)

    @property
    def _allow_done_after_reset(self) -> bool:
        return self.base_env._allow_done_after_reset  # the base env's, as TorchRL's

    @_allow_done_after_reset.setter
    def _allow_done_after_reset(self, value) -> None:
        raise RuntimeError("_allow_done_after_reset is a read-only property for TransformedEnvs: set "
                           "allow_done_after_reset on the base env")

    def _set(self, side: str, name: str, value) -> None:
        # every spec setter ends here: the specs are what the transforms make of the base env's
        raise RuntimeError(
            f"TransformedEnv: {name} is what the transforms make of the base env's specs; set it on the base env "
            f"(env.base_env.{name.removeprefix('full_')} = ...) or add a transform that changes it"
        )

    def add_truncated_keys(self) -> TransformedEnv:
        self.base_env.add_truncated_keys()
        self._rebuild()
        return self

    def root_specs(self):
        return dict(self._layout.root_specs)

    def next_specs(self):
        return dict(self._layout.next_specs)

    @property
    def state_keys(self):
        if self._torchrl_style:  # what step_mdp carries: the observations, as for a TorchRL-style env,
            # and the rewards that are state too (RewardSum(reward_spec=True)'s sums), as TorchRL's
            state = set(self.full_state_spec.keys(True, True))
            return (*super().state_keys, *(k for k in self.reward_keys if k in state))
        return self._layout.state_keys

    @property
    def passthrough_keys(self) -> tuple:
        return tuple(k for k in self._layout.passthrough if k in self._layout.state_keys)

    def _primed_action_keys(self) -> tuple:
        return tuple(k for k in self._layout.passthrough if k in self.action_keys)

    # ---- the hot path --------------------------------------------------------------------------------
    def _views(self, root: dict, nxt: dict | None = None) -> list:
        """Per stage, the (root, next) dicts under that stage's keys: built once per layout."""
        cached = self._view_cache.get(id(root))
        if cached is not None and cached[0] is root and (nxt is None or cached[1] is nxt):
            return cached[2]
        if len(self._view_cache) > 4:  # the TensorDict API allocates new arrays per call
            self._view_cache.clear()
        views = self._layout.views(root, nxt)
        self._view_cache[id(root)] = (root, nxt, views)
        return views

    def _reset_upto(self, stage: int, t: int, mask, views: list) -> None:
        self.base_env._reset_into(views[0][0], t, mask)
        for on_reset, index in self._reset_chains[stage]:
            on_reset(views[index][0], t, mask)

    def _step_upto(self, stage: int, action, t: int, views: list) -> None:
        self._active_views = views  # what FrameSkipTransform repeats
        self._active_action = action
        root, nxt = views[0]
        if not self._action_direct:
            for on_action, index in self._on_action:
                if index <= stage:
                    on_action(views[index][0], t)
            action = None if self._base_action is None else root[self._base_action][t]
        if self._step_mask is None:
            self.base_env._step_into(action, t, root, nxt)
        else:  # the base env's idle rows hold their root's before the transforms run on every row, as TorchRL's
            self.base_env._skip_envs(action, root, nxt, self._step_mask, t)
        for on_step, index in self._step_chains[stage]:
            r, x = views[index]
            on_step(r, x, t)

    def _reset_into(self, root, t, mask):
        views = self._views(root)
        self._active_root, self._active_views = root, views
        self._reset_upto(len(self._hooks), t, mask, views)

    def _step_into(self, action, t, root, nxt):
        views = self._views(root, nxt)
        self._step_upto(len(self._hooks), action, t, views)

    def _skip_envs(self, action, root, nxt, mask, t=0):
        if not mask.any():  # the whole step skipped: the transforms' too, as TorchRL's
            super()._skip_envs(action, root, nxt, mask, t)
        else:  # the base env fills its idle rows, then every transform runs on every row
            self._partial_step_into(action, t, root, nxt, mask)

    def _partial_step_into(self, action, t, root, nxt, mask):
        # the base env steps what it can of the batch (repeats by FrameSkipTransform too); the
        # transforms run on every row, as TorchRL's do on the zeros of the envs not stepped
        self._step_mask = mask
        try:
            self._step_into(action, t, root, nxt)
        finally:
            self._step_mask = None

    # ---- TorchRL's TensorDict hooks of an env (a transform's parent is stepped through them) ------
    @property
    def _skips_steps(self) -> bool:
        return self.__dict__.get("_skipping", False)

    @property
    def batch_locked(self) -> bool:
        return self.base_env.batch_locked

    @batch_locked.setter
    def batch_locked(self, value) -> None:
        raise RuntimeError("batch_locked is a read-only property")

    @property
    def _torchrl_style(self) -> bool:
        """Whether the env steps on TensorDicts, as TorchRL's (nested done groups or heterogeneous
        entries in the base env: see the module)."""
        return self.__dict__.get("_on_tensordicts", False)

    @property
    def _steps_with_grad(self) -> bool:
        """Over a base env that carries gradients, the transforms and the base env step on
        TensorDicts when the input requires grad (:meth:`EnvBase.step`), as TorchRL's."""
        return self.base_env._steps_with_grad

    def _step_with_grad(self, tensordict):
        return self._step_tensordicts(tensordict)

    def _step(self, tensordict):
        if not self._torchrl_style:
            return self.step(tensordict.clone(False)).get("next")
        return self._step_tensordicts(tensordict)

    def _step_tensordicts(self, tensordict):
        """The transforms' and the base env's step on TensorDicts (TorchRL's ``_step``)."""
        inputs = self.transform.inv(tensordict)  # a shallow copy, the actions as the base env reads them
        partial = inputs.get("_step", None)  # a ConditionalSkip's
        if partial is not None and not partial.any():  # the whole step skipped, the transforms' too
            return self._skip_tensordict(inputs.exclude("_step"))
        next_tensordict = self.base_env.step(inputs).get("next")
        return self.transform._step(inputs.exclude("_step"), next_tensordict)

    def _reset(self, tensordict=None, **kwargs):
        if not self._torchrl_style:
            return self.reset(tensordict)
        if tensordict is not None:  # the reset flags and the state only, as TorchRL's
            tensordict = tensordict.select(*self.reset_keys, *self.full_state_spec.keys(True, True), strict=False)
        tensordict = self.transform._reset_env_preprocess(tensordict)
        tensordict_reset = self._reset_base(tensordict, **kwargs)
        source = tensordict_reset.empty() if tensordict is None else tensordict
        return self.transform._reset(source, tensordict_reset)

    def _reset_base(self, tensordict, **kwargs):
        """The base env's reset output for ``tensordict`` (its reset flags and state), done flags complete."""
        base = self.base_env
        if base._torchrl_style:
            return complete_done(base.full_done_spec, base._reset(tensordict, **kwargs))
        # an env of the array API (its reset consumes the reset flags of what it is given)
        return base.reset(None if tensordict is None else tensordict.clone(), **kwargs)

    def _set_seed(self, seed):
        self.base_env._set_seed(seed)

    def _seed_reset(self, seed):
        self.base_env._seed_reset(seed)  # reset(seed=) seeds as the base env's own does (a gymnasium env's reset)

    def set_seed(self, seed=None, static_seed: bool = False):
        return self.base_env.set_seed(seed, static_seed=static_seed)

    # ---- state, lifetime ---------------------------------------------------------------------------
    def state_dict(self) -> OrderedDict:
        """The transforms' ``state_dict`` (TorchRL's keys), plus the base env's under ``"base_env"``."""
        state = self.transform.state_dict()
        base = self.base_env.state_dict()
        if base:
            state["base_env"] = base
        return state

    def load_state_dict(self, state_dict) -> None:
        state_dict = OrderedDict(state_dict)
        base = state_dict.pop("base_env", None)
        if base is not None:
            self.base_env.load_state_dict(base)
        self.transform.load_state_dict(state_dict)

    def train(self, mode: bool = True) -> TransformedEnv:
        self.transform.train(mode)
        return self

    def eval(self) -> TransformedEnv:
        self.transform.eval()
        return self

    def close(self, *, raise_if_closed: bool = True):
        self.base_env.close()
        self.transform.close()
        self.is_closed = True

    def __getattr__(self, name: str):
        # TorchRL's: public attributes the transformed env lacks are the base env's
        if name.startswith("_") or name == "base_env":
            raise AttributeError(f"{type(self).__name__!r} object has no attribute {name!r}")
        base = self.__dict__.get("base_env")
        if base is None:
            raise AttributeError(f"{type(self).__name__!r} object has no attribute {name!r}")
        return getattr(base, name)

    def __repr__(self) -> str:
        return f"TransformedEnv(\n    env={self.base_env},\n    transform={self.transform})"


def _needs_tensordicts(env: EnvBase) -> bool:
    """Whether ``env`` has done flags in nested groups, a heterogeneous (lazy-stacked) entry or a
    non-tensor one, or is batch-unlocked (takes any batch: no array layout fits it), or resets
    itself (an ``AutoResetEnv``)."""
    if any(isinstance(key, tuple) for key in env.reset_keys) or not env.batch_locked or env._resets_itself:
        return True
    for spec in (env.output_spec, env.input_spec):
        if any(isinstance(sub, (Stacked, StackedComposite)) for _, sub in spec.items(True)):
            return True
    return _has_non_tensor(env)


def _has_non_tensor(env: EnvBase) -> bool:
    return any(holds_non_tensor(sub) for spec in (env.output_spec, env.input_spec)
               for _, sub in spec.items(True, True))


def _nodes(transform: Transform):
    """Every transform of a chain in order, ``Compose``s before their contents."""
    yield transform
    if isinstance(transform, Compose):
        for t in transform:
            yield from _nodes(t)


def _parse_arguments(args, kwargs):
    """TorchRL's ways of passing the base env and transform; unknown keywords are an error."""
    if "env" in kwargs:
        raise TypeError("TransformedEnv: the 'env' argument has been removed (as in TorchRL); use 'base_env'")
    if args:
        base_env, rest = args[0], list(args[1:])
    elif "base_env" in kwargs:
        base_env, rest = kwargs.pop("base_env"), []
    else:
        raise TypeError("TransformedEnv requires a base_env argument")
    transform = rest.pop(0) if rest else kwargs.pop("transform", None)
    cache_specs = rest.pop(0) if rest else kwargs.pop("cache_specs", True)
    if rest:
        raise TypeError(f"TransformedEnv: too many positional arguments ({len(args)})")
    if not isinstance(cache_specs, bool):
        raise TypeError(f"TransformedEnv: cache_specs must be a bool, got {cache_specs!r}")
    auto_unwrap = kwargs.pop("auto_unwrap", None)
    device = kwargs.pop("device", None)
    if device is not None and str(device) != str(base_env.device):
        raise ValueError(f"TransformedEnv: device={device!r} differs from the base env's {base_env.device}; "
                         "reap envs step on the CPU (move batches with the collector's storing_device)")
    if kwargs:
        raise TypeError(f"TransformedEnv: unexpected keyword arguments {sorted(kwargs)}")
    return base_env, transform, auto_unwrap
