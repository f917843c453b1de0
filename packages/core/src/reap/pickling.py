"""``cloud_dumps``: an object by value (cloudpickle: lambdas, local functions) for a worker
process, so that the ``mp.Value``s and ``mp.Array``s it holds reach a starting child shared, as
they do when passed to ``Process`` directly (tensors are copied, as plain pickle copies them).

Importing this module also makes multiprocessing hand the shared memory of an ``mp.Value`` to a
starting child once however many times it is pickled for it: reap pickles a worker's arguments
itself (``Payload``, by value, maybe twice when a first attempt fails) before multiprocessing
pickles them again, and a descriptor registered twice makes the child fail to start ("bad
value(s) in fds_to_keep"); the first registration is reused instead.

Examples:
    >>> import pickle
    >>> from reap.pickling import cloud_dumps
    >>> pickle.loads(cloud_dumps(lambda x: x + 1))(1)
    2
"""

from __future__ import annotations

import ctypes
import io
import multiprocessing.heap
import multiprocessing.reduction
import pickle
from collections import ChainMap
from collections.abc import Mapping
from multiprocessing.context import get_spawning_popen

import cloudpickle  # gymnasium's dependency: wherever reap-core is


def _dup_fd_once(fd: int):
    """multiprocessing's ``DupFd(fd)``, reusing the registration when the starting child already
    gets ``fd``."""
    popen = get_spawning_popen()
    sent = getattr(popen, "_fds", None)
    if popen is None or sent is None or fd not in sent:
        return multiprocessing.reduction.DupFd(fd)
    # forkserver children find their descriptors by position, spawn children by number
    return popen.DupFd(sent.index(fd) if popen.method == "forkserver" else fd)


def _reduce_arena(arena):
    if arena.fd == -1:
        raise ValueError("Arena is unpicklable because forking was enabled when it was created")
    return multiprocessing.heap.rebuild_arena, (arena.size, _dup_fd_once(arena.fd))


multiprocessing.reduction.ForkingPickler.register(multiprocessing.heap.Arena, _reduce_arena)
class _MpValueReducers(Mapping):
    """What a pickler needs besides copyreg's to send an ``mp.Value``/``mp.Array`` shared to a
    starting child: the reducers multiprocessing registers for their ctypes objects and our
    arena's. Not the rest of ForkingPickler's table, whose torch reductions would move every
    tensor (a policy's weights) to shared memory instead of copying it."""

    @staticmethod
    def _is_ctypes(cls) -> bool:
        return isinstance(cls, type) and issubclass(cls, (ctypes._SimpleCData, ctypes.Array, ctypes.Structure))

    def _ctypes_keys(self):
        return [k for k in multiprocessing.reduction.ForkingPickler._extra_reducers if self._is_ctypes(k)]

    def __getitem__(self, cls):
        if cls is multiprocessing.heap.Arena:
            return _reduce_arena
        if self._is_ctypes(cls):
            return multiprocessing.reduction.ForkingPickler._extra_reducers[cls]
        raise KeyError(cls)

    def __iter__(self):
        return iter([multiprocessing.heap.Arena, *self._ctypes_keys()])

    def __len__(self):
        return 1 + len(self._ctypes_keys())


MP_VALUE_REDUCERS = _MpValueReducers()


class CloudForkingPickler(cloudpickle.Pickler):
    """cloudpickle that can send an ``mp.Value`` (its shared memory travels as a descriptor to a
    starting child, not as bytes, which cloudpickle alone refuses)."""

    dispatch_table = ChainMap(MP_VALUE_REDUCERS, cloudpickle.Pickler.dispatch_table)


def cloud_dumps(obj) -> bytes:
    """``obj`` by value, multiprocessing's objects included (see the module)."""
    buffer = io.BytesIO()
    CloudForkingPickler(buffer, pickle.HIGHEST_PROTOCOL).dump(obj)
    return buffer.getvalue()
