"""``BurnInTransform``: recurrent states brought up to date over the first steps of sampled
sequences (TorchRL's; a replay buffer transform, as in R2D2).

Examples:
    >>> import torch
    >>> from tensordict import TensorDict
    >>> from tensordict.nn import TensorDictModule
    >>> from reap.envs.transforms import BurnInTransform
    >>> def running_sum(obs, hidden):  # a recurrent module over time: the state sums the inputs
    ...     return hidden[..., :1, :] + obs.cumsum(-2)
    >>> module = TensorDictModule(running_sum, in_keys=["obs", "hidden"], out_keys=[("next", "hidden")])
    >>> data = TensorDict(obs=torch.ones(2, 6, 1), hidden=torch.zeros(2, 6, 1), batch_size=[2, 6])
    >>> out = BurnInTransform([module], burn_in=4)(data)
    >>> out.shape, out["hidden"][:, 0].flatten().tolist()
    (torch.Size([2, 2]), [4.0, 4.0])
"""

from __future__ import annotations

import warnings
from collections.abc import Sequence

import torch
from tensordict.nn import TensorDictModuleBase

from reap.envs.transforms.transform import Transform

REPLAY_ONLY = "BurnInTransform can only be appended to a ReplayBuffer"


class BurnInTransform(Transform):
    """Run ``modules`` (without gradients) over the first ``burn_in`` steps of each sequence (time
    is the batch's second dim) and return the other steps, whose first step holds the states the
    modules wrote in ``"next"`` at the last burnt-in step.

    Args:
        modules: TensorDictModules that take sequences (recurrent modules in recurrent mode).
        burn_in: the steps burnt in.
        out_keys: the states carried over (default: every ``("next", key)`` the modules write,
            as ``key``).
    """

    invertible = False

    def __init__(self, modules: Sequence[TensorDictModuleBase], burn_in: int, out_keys=None):
        if not isinstance(modules, Sequence):
            modules = [modules]
        for module in modules:
            if not isinstance(module, TensorDictModuleBase):
                raise ValueError(f"All modules must be TensorDictModules, but a {type(module)} was provided.")
        in_keys = {key for module in modules for key in module.in_keys}
        if out_keys is None:
            out_keys = {key[1] for module in modules for key in module.out_keys
                        if isinstance(key, tuple) and key[0] == "next"}
        else:
            kept = set()
            for key in out_keys:
                if isinstance(key, tuple) and key[0] == "next":
                    warnings.warn(f"The 'next' key is not needed in the BurnInTransform `out_key` {key[1]} and will be "
                                  "ignored: the states are read in the next step of the burnt-in data.", stacklevel=2)
                    key = key[1]
                kept.add(key)
            out_keys = kept
        super().__init__(in_keys=list(in_keys), out_keys=list(out_keys))
        self.modules = modules
        self.burn_in = burn_in

    def _call(self, next_tensordict):
        raise RuntimeError(REPLAY_ONLY)

    def _step(self, tensordict, next_tensordict):
        raise RuntimeError(REPLAY_ONLY + ".")

    def _attach(self, env):
        raise RuntimeError(REPLAY_ONLY + ".")

    def forward(self, tensordict):
        if self.burn_in == 0:
            return tensordict
        device = tensordict.device
        burnt, out = tensordict[..., : self.burn_in], tensordict[..., self.burn_in:]
        with torch.no_grad():
            for module in self.modules:
                params = next(iter(module.parameters()), None)
                burnt = module(burnt if params is None else burnt.to(params.device))
        states = burnt.to(device)["next"][..., -1]
        for key in self.out_keys:
            value = out.get(key, None)
            value = (torch.zeros((*out.shape, *states.get(key).shape[len(states.shape):]), dtype=states.get(key).dtype)
                     if value is None else value.clone())  # the sampled data stays as it was
            value[:, 0] = states.get(key)
            out.set(key, value)
        return out

    def __repr__(self) -> str:
        return f"{type(self).__name__}(burn_in={self.burn_in}, in_keys={self.in_keys}, out_keys={self.out_keys})"
