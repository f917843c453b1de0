""":class:`RemoteTensorDictReplayBuffer`: a TensorDict buffer whose methods ``torch.distributed.rpc``
calls on an ``RRef`` of it, as TorchRL's.

Examples:
    >>> import torch
    >>> from tensordict import TensorDict
    >>> from reap_replay import LazyTensorStorage, RemoteTensorDictReplayBuffer
    >>> rb = RemoteTensorDictReplayBuffer(storage=LazyTensorStorage(10), batch_size=2)
    >>> _ = rb.extend(TensorDict({"obs": torch.zeros(4, 3)}, [4]))  # called locally as usual
    >>> rb.sample().batch_size
    torch.Size([2])
"""

from __future__ import annotations

import functools
import inspect

from reap_replay.buffers.base import ReplayBuffer
from reap_replay.buffers.tensordict import TensorDictReplayBuffer


def _local_value(method):
    """``method`` called with the object an ``RRef`` holds when given the ``RRef``."""

    @functools.wraps(method)
    def call(self, *args, **kwargs):
        if not isinstance(self, TensorDictReplayBuffer):
            self = self.local_value()
        return method(self, *args, **kwargs)

    # named as the attribute it becomes, so that pickle (rpc sends methods by name) finds it again
    call.__module__, call.__qualname__ = __name__, f"RemoteTensorDictReplayBuffer.{method.__name__}"
    return call


class RemoteTensorDictReplayBuffer(TensorDictReplayBuffer):
    """A :class:`TensorDictReplayBuffer` whose public methods take an ``RRef`` of it in place of
    ``self``: ``rpc.rpc_sync(owner, RemoteTensorDictReplayBuffer.sample, args=(rref, 32))``.

    Locally it is a :class:`TensorDictReplayBuffer`. For a buffer in another process without
    torch.distributed, use ``reap_ray.RayReplayBuffer`` (reap-collectors-ray) or send the buffer
    itself to the process (it shares its rows; see :class:`ReplayBuffer`).
    """


for _name, _method in vars(TensorDictReplayBuffer).items() | vars(ReplayBuffer).items():
    if not _name.startswith("_") and inspect.isfunction(_method):
        setattr(RemoteTensorDictReplayBuffer, _name, _local_value(getattr(TensorDictReplayBuffer, _name)))
