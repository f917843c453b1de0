"""``UnaryTransform`` (a function of one entry into another) and ``Hash`` (TorchRL's).

Both work on tensors and on non-tensor data (strings: ``NonTensorData``), mostly in replay
buffers and models; in an env they run through their TensorDict hooks. The specs of the outputs
are those of what the function returns on a zero input.

Examples:
    >>> from tensordict import NonTensorData, TensorDict
    >>> from reap.envs.transforms import Hash
    >>> td = TensorDict(text=NonTensorData("hello"))
    >>> Hash(in_keys=["text"], out_keys=["hash"])(td)["hash"][:4]
    tensor([ 44, 242,  77, 186], dtype=torch.uint8)
"""

from __future__ import annotations

import hashlib
from copy import copy

import torch
from tensordict import NonTensorData, NonTensorStack, TensorDictBase

from reap.envs.transforms.transform import Transform, missing_tolerance
from reap.specs import Composite, Unbounded


def _spec_of(value, batch) -> object:
    if isinstance(value, TensorDictBase):
        return Composite({k: _spec_of(v, value.batch_size) for k, v in value.items()}, shape=value.batch_size)
    return Unbounded(shape=value.shape, dtype=value.dtype, device=value.device)


class UnaryTransform(Transform):
    """``out_key = fn(in_key)`` (and ``in_key_inv = inv_fn(out_key_inv)`` on the way in).

    Args:
        in_keys, out_keys, in_keys_inv, out_keys_inv: the entries.
        fn: the function of one value; ``inv_fn``: the inverse one (default ``fn``).
        use_raw_nontensor: pass ``NonTensorData`` as it is rather than its content.
    """

    enable_inv_on_reset = True

    def __init__(self, in_keys, out_keys, in_keys_inv=None, out_keys_inv=None, *, fn, inv_fn=None,
                 use_raw_nontensor: bool = False):
        super().__init__(in_keys=in_keys, out_keys=out_keys, in_keys_inv=in_keys_inv, out_keys_inv=out_keys_inv)
        self._fn, self._inv_fn, self._use_raw_nontensor = fn, inv_fn, use_raw_nontensor

    def _raw(self, value):
        if not self._use_raw_nontensor:
            if isinstance(value, NonTensorData):
                return value.get("data") if value.dim() == 0 else value.tolist()
            if isinstance(value, NonTensorStack):
                return value.tolist()
        return value

    def _apply_transform(self, value):
        return self._fn(self._raw(value))

    def _inv_apply_transform(self, state):
        state = self._raw(state)
        return self._inv_fn(state) if self._inv_fn is not None else self._fn(state)

    def _reset(self, tensordict, tensordict_reset):
        with missing_tolerance(self):
            return self._call(tensordict_reset)

    def _mapped(self, spec, sample, pairs):
        for in_key, out_key in pairs:
            if in_key in spec.keys(True):
                value = sample.get(out_key)
                spec.set(out_key, _spec_of(value, sample.batch_size))
        return spec

    def transform_output_spec(self, output_spec):
        output_spec = output_spec.clone()
        zeros = output_spec.zero()
        sample = zeros["full_observation_spec"].update(zeros["full_reward_spec"]).update(zeros["full_done_spec"])
        sample = self.forward(sample)
        pairs = list(zip(self.in_keys, self.out_keys))
        for name in ("full_observation_spec", "full_reward_spec", "full_done_spec"):
            output_spec[name] = self._mapped(output_spec[name], sample, pairs)
        return output_spec

    def transform_input_spec(self, input_spec):
        input_spec = input_spec.clone()
        zeros = input_spec.zero()
        sample = zeros["full_action_spec"].update(zeros["full_state_spec"])
        for in_key, out_key in zip(self.in_keys_inv, self.out_keys_inv):
            value = sample.get(in_key, None)
            if value is not None:
                sample.set(out_key, self._apply_transform(value))
            elif not self.missing_tolerance:
                raise KeyError(f"'{in_key}' not found in tensordict {sample}")
        pairs = list(zip(self.in_keys_inv, self.out_keys_inv))
        for name in ("full_action_spec", "full_state_spec"):
            input_spec[name] = self._mapped(input_spec[name], sample, pairs)
        return input_spec


class Hash(UnaryTransform):
    """Hash ``in_keys`` into ``out_keys`` (a SHA-256 of the text by default, as uint8 tensors);
    with ``in_keys_inv``, a ``repertoire`` maps hashes back to what was hashed.

    Args:
        hash_fn: ``fn(value)`` (or ``fn(value, seed)``) returning a tensor.
        seed: prepended to the text (default hash) or passed to ``hash_fn``.
        repertoire: a dict of the hashes seen (made when ``in_keys_inv`` are given).
    """

    def __init__(self, in_keys, out_keys, in_keys_inv=None, out_keys_inv=None, *, hash_fn=None, seed=None,
                 use_raw_nontensor: bool = False, repertoire=None):
        hash_fn = Hash.reproducible_hash if hash_fn is None else hash_fn
        self._repertoire = {} if repertoire is None and in_keys_inv else repertoire
        self._seed, self._hash_fn = seed, hash_fn
        super().__init__(in_keys=in_keys, out_keys=out_keys, in_keys_inv=in_keys_inv, out_keys_inv=out_keys_inv,
                         fn=self.call_hash_fn, inv_fn=self.get_input_from_hash, use_raw_nontensor=use_raw_nontensor)

    def state_dict(self, *args, destination=None, prefix="", keep_vars=False):
        return {"_repertoire": self._repertoire}

    @classmethod
    def hash_to_repertoire_key(cls, hash_tensor):
        if isinstance(hash_tensor, torch.Tensor):
            if hash_tensor.dim() == 0:
                return hash_tensor.tolist()
            return tuple(cls.hash_to_repertoire_key(t) for t in hash_tensor.tolist())
        if isinstance(hash_tensor, list):
            return tuple(cls.hash_to_repertoire_key(t) for t in hash_tensor)
        return hash_tensor

    def get_input_from_hash(self, hash_tensor):
        if self._repertoire is None:
            raise RuntimeError("An inverse transform was queried but the repertoire is None.")
        return self._repertoire[self.hash_to_repertoire_key(hash_tensor)]

    def call_hash_fn(self, value):
        hashed = self._hash_fn(value) if self._seed is None else self._hash_fn(value, self._seed)
        if not torch.is_tensor(hashed):
            raise ValueError(f"Hash function must return a tensor, but got {type(hashed)}")
        if self._repertoire is not None:
            self._repertoire[self.hash_to_repertoire_key(hashed)] = copy(value)
        return hashed

    @classmethod
    def reproducible_hash(cls, string, seed=None):
        """The SHA-256 of ``seed + string`` as 32 uint8 values."""
        string = "" if string is None else string
        text = seed + string if seed is not None else str(string)
        return torch.frombuffer(bytearray(hashlib.sha256(text.encode("utf-8")).digest()), dtype=torch.uint8)
