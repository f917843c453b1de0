"""``TensorDictPrimer``: entries (e.g. recurrent states) that the env sets at every reset (TorchRL's).

Examples:
    >>> from reap.envs import GymEnv
    >>> from reap.envs.transforms import TensorDictPrimer, TransformedEnv
    >>> from reap.specs import Unbounded
    >>> env = TransformedEnv(GymEnv("Pendulum-v1", num_envs=2),
    ...                      TensorDictPrimer({"hidden": Unbounded(shape=(1, 8))}, expand_specs=True))
    >>> env.reset()["hidden"].shape
    torch.Size([2, 1, 8])
"""

from __future__ import annotations

import torch

from reap.envs.transforms.transform import Transform, expand_right, reset_flags, write_rows
from reap.specs import Composite, TensorSpec


class TensorDictPrimer(Transform):
    """Add ``primers`` (key: spec) to the env: set at each reset (``default_value``, or drawn from
    the spec with ``random=True``) and carried from step to step; a policy that writes
    ``("next", key)`` (``LSTMModule``) updates them, one that does not leaves ``("next", key)``
    equal to the root value, as in TorchRL.

    Args:
        primers: a dict or ``Composite`` of specs (or the specs as keyword arguments).
        random: draw the values from the specs at reset.
        default_value: a number, a callable returning the value, or a dict of them per key
            (default 0); with ``single_default_value=True`` a callable returning the whole
            TensorDict, called with ``reset=`` (the envs being reset).
        reset_key: reap's envs have one, ``"_reset"``.
        expand_specs: the specs omit the env's batch dims (True), hold them (False); None (the
            default) requires the shapes to match, as TorchRL does.
    """

    _array_hooks = True

    def __init__(self, primers=None, random: bool | None = None, default_value=None, reset_key=None,
                 expand_specs: bool | None = None, single_default_value: bool = False,
                 call_before_env_reset: bool = False, **kwargs):
        device = kwargs.pop("device", None)
        if primers is not None:
            if kwargs:
                raise RuntimeError(f"providing the primers as a dictionary is incompatible with extra keys "
                                   f"'{kwargs.keys()}' provided as kwargs.")
            kwargs = primers
        if not isinstance(kwargs, Composite):
            kwargs = dict(kwargs)
            shape = kwargs.pop("shape", kwargs.pop("batch_size", None))
            for key, spec in kwargs.items():
                if not isinstance(spec, TensorSpec):
                    raise ValueError(f"The values of the primers must be a subtype of the TensorSpec class. Got "
                                     f"{type(spec)} instead (key {key!r}).")
            kwargs = Composite(kwargs, shape=shape, device=device)
        if random and default_value:
            raise ValueError("Setting random to True and providing a default_value are incompatible.")
        if reset_key not in (None, "_reset"):
            raise ValueError(f"TensorDictPrimer: reap envs have one reset key, '_reset'; got reset_key={reset_key!r}")
        if call_before_env_reset:
            raise ValueError("TensorDictPrimer: call_before_env_reset=True (values the base env's reset reads) is not "
                             "supported by reap; leave it False")
        super().__init__()
        self.primers = kwargs
        self.random = random
        self.expand_specs = expand_specs
        self.single_default_value = single_default_value
        self.call_before_env_reset = call_before_env_reset
        self.reset_key = "_reset"
        default_value = default_value or 0.0
        keys = list(self.primers.keys(True, True))
        if isinstance(default_value, dict):
            if set(default_value) != set(keys):
                raise ValueError("If a default_value dictionary is provided, it must match the primers keys.")
        elif not (single_default_value and callable(default_value)):
            default_value = {key: default_value for key in keys}
        self.default_value = default_value

    # ---- specs ---------------------------------------------------------------------------------
    def transform_observation_spec(self, observation_spec):
        if self.primers.shape[: observation_spec.ndim] != observation_spec.shape:
            if self.expand_specs:
                self.primers = self.primers.expand(*self.parent.batch_size, *self.primers.shape)
            elif self.expand_specs is None:
                raise RuntimeError(
                    f"expand_specs wasn't specified in the {type(self).__name__} constructor, and the shape of the "
                    f"primers and observation specs mismatch ({self.primers.shape=} and {observation_spec.shape=}) "
                    "- indicating a batch-size incongruency. Make sure the expand_specs arg is properly set or that "
                    "the primer shape matches the environment batch-size."
                )
            else:
                self.primers.shape = observation_spec.shape
        observation_spec.update(self.primers.clone())
        return observation_spec

    def transform_input_spec(self, input_spec):
        state = self.transform_observation_spec(input_spec["full_state_spec"])
        for key in list(input_spec["full_action_spec"].keys(True, True)):
            if key in state.keys(True, True):
                input_spec["full_action_spec", key] = state[key]
                del state[key]
        input_spec["full_state_spec"] = state
        return input_spec

    # ---- values --------------------------------------------------------------------------------
    def _value(self, key, spec) -> torch.Tensor:
        if self.random:
            return spec.rand()
        value = self.default_value[key]
        if callable(value):
            value = value()
            if not spec.is_in(value):
                raise ValueError(f"TensorDictPrimer: the default value of {key!r} is not in its spec {spec}")
            return value
        return torch.full(spec.shape, value, dtype=spec.dtype, device=spec.device)

    def forward(self, tensordict):
        if self.single_default_value and callable(self.default_value):
            return tensordict.update(self.default_value())
        for key, spec in self.primers.items(True, True):
            if spec.shape[: tensordict.ndim] != tensordict.shape:
                raise RuntimeError(f"The leading shape of the spec must match the tensordict's, but it does not: got "
                                   f"tensordict.shape={tensordict.shape} whereas {key} spec's shape is {spec.shape}.")
            tensordict.set(key, self._value(key, spec))
        return tensordict

    def _step(self, tensordict, next_tensordict):
        for key in self.primers.keys(True, True):
            if key not in next_tensordict.keys(True, True):
                next_tensordict.set(key, tensordict.get(key))
        return next_tensordict

    def _reset(self, tensordict, tensordict_reset):
        reset = reset_flags(tensordict)
        if not reset.any():
            return tensordict_reset
        if self.single_default_value and callable(self.default_value):
            return tensordict_reset.update(self.default_value(reset=reset))
        for key, spec in self.primers.items(True, True):
            value = self._value(key, spec)
            previous = tensordict.get(key, None)
            if not self.random and not callable(self.default_value[key]):
                previous = torch.zeros_like(value) if previous is None else previous
                value = torch.where(expand_right(reset, value), value, previous)
            tensordict_reset.set(key, value)
        return tensordict_reset

    # ---- arrays --------------------------------------------------------------------------------
    def passthrough_keys(self):
        return tuple(self.primers.keys(True, True))

    def on_reset(self, root, t, mask):
        rows = None if mask is None or mask.ndim == 0 else mask
        if self.single_default_value and callable(self.default_value):
            reset = torch.ones(self.primers.shape, dtype=torch.bool) if rows is None else torch.from_numpy(rows)
            values = self.default_value(reset=reset)
            for key in self.primers.keys(True, True):
                value = values.get(key).numpy(force=True)
                if rows is None:
                    root[key][t] = value
                else:
                    root[key][t][rows] = value
            return
        for key, spec in self.primers.items(True, True):
            value = self.default_value.get(key) if isinstance(self.default_value, dict) else None
            if not self.random and isinstance(value, (int, float)):
                if rows is None:
                    root[key][t] = value
                else:
                    root[key][t][rows] = value
            else:
                write_rows(root[key][t, ...], self._value(key, spec).numpy(force=True), rows)  # [t, ...]: a view even of a 0-d entry

    def __repr__(self) -> str:
        default = self.default_value if callable(self.default_value) else {
            k: v if isinstance(v, float) else "Callable" for k, v in self.default_value.items()}
        return f"{type(self).__name__}(primers={self.primers}, default_value={default}, random={self.random})"
