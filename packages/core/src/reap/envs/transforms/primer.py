"""``TensorDictPrimer``: entries (e.g. recurrent states) that the env resets to a default."""

from __future__ import annotations

from reap.envs.transforms.transformed_env import Transform
from reap.specs import TensorSpec


class TensorDictPrimer(Transform):
    """Add entries (e.g. a recurrent policy's hidden states) that the env resets to a default.

    Each key is allocated on the root and ``"next"`` sides from its spec, set to
    ``default_value`` at every reset, and carried from ``("next", key)`` to the next step's
    root, where the policy writes it (``LSTMModule`` writes ``("next", "recurrent_state_h")``); a
    policy that does not write it leaves ``("next", key)`` equal to the root value, as in TorchRL.
    Specs omit the env's batch dims when ``expand_specs=True`` (the default).

    Examples:
        >>> from reap.envs import GymEnv
        >>> from reap.envs.transforms import TensorDictPrimer, TransformedEnv
        >>> from reap.specs import Unbounded
        >>> env = TransformedEnv(GymEnv("Pendulum-v1", num_envs=2),
        ...                      TensorDictPrimer({"hidden": Unbounded(shape=(1, 8))}))
        >>> env.reset()["hidden"].shape
        torch.Size([2, 1, 8])
    """

    def __init__(self, primers=None, *, default_value: float = 0.0, expand_specs: bool = True,
                 **kwargs):
        primers = dict(primers.items() if primers is not None else {}, **kwargs)
        if not primers:
            raise ValueError("TensorDictPrimer: give at least one key and its spec")
        for key, spec in primers.items():
            if not isinstance(key, str):
                raise TypeError(f"TensorDictPrimer: keys must be plain strings (reap's flat keys), got {key!r}")
            if not isinstance(spec, TensorSpec):
                raise TypeError(f"TensorDictPrimer: the spec of {key!r} must be a TensorSpec, got {spec!r}")
        super().__init__(in_keys=[])
        self.primers = primers
        self.default_value = default_value
        self.expand_specs = expand_specs

    def _add(self, specs):
        batch = tuple(self.parent.batch_size)
        for key, spec in self.primers.items():
            if self.expand_specs:
                spec = spec.expand(*batch, *spec.shape)
            elif tuple(spec.shape[: len(batch)]) != batch:
                raise ValueError(
                    f"TensorDictPrimer: the spec of {key!r} has shape {tuple(spec.shape)}, which does not "
                    f"start with the env's batch dims {batch}; pass expand_specs=True"
                )
            specs[key] = spec
        return specs

    transform_root_specs = transform_next_specs = _add

    def state_keys(self):
        return tuple(self.primers)

    def passthrough_keys(self):
        return tuple(self.primers)

    def on_reset(self, root, t, mask):
        for key in self.primers:
            if mask is None or mask.ndim == 0:
                root[key][t] = self.default_value
            else:
                root[key][t][mask] = self.default_value
