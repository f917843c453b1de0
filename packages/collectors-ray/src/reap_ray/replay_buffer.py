"""``RayReplayBuffer``: a reap-replay buffer living in a Ray actor.

The trainer, and the actors of a ``RayCollector(replay_buffer=rb)``, reach the same buffer
through its actor handle: collectors write their batches into it directly (flattened to
frames), the trainer samples from it. Every call waits at most ``call_timeout`` seconds.
"""

from __future__ import annotations

import weakref

import ray
from ray.exceptions import GetTimeoutError, RayActorError

from reap.collectors.arguments import START_TIMEOUT, checked_seconds, renamed
from reap_ray._ray import check_placeable, ensure_ray, kill_actors, wait_ready
from reap_ray._ray import remote_config as actor_options


class ReplayBufferActor:
    """The actor's side: builds the buffer where it runs and answers calls on it."""

    def __init__(self, replay_buffer_cls, kwargs):
        self.buffer = replay_buffer_cls(**kwargs)

    def ready(self):
        return ray.get_runtime_context().get_node_id()

    def call(self, method, *args, **kwargs):
        return getattr(self.buffer, method)(*args, **kwargs)

    def extend(self, data):
        return self.buffer.extend(data)

    def len(self):
        return len(self.buffer)


class RayReplayBuffer:
    """A replay buffer in a Ray actor, used from the driver and written by Ray collectors.

    Keyword Args:
        storage, sampler, writer: reap-replay objects, or constructors (classes, callables)
            that build them in the actor (e.g. ``functools.partial(LazyMemmapStorage, 10**6)``).
        batch_size (int, optional): the default ``sample()`` size.
        replay_buffer_cls: the buffer class (default :class:`reap_replay.ReplayBuffer`; e.g.
            ``TensorDictPrioritizedReplayBuffer``); other keyword arguments go to it.
        remote_config (dict, optional): Ray actor options (default ``num_cpus=1``, no GPU, 2 GiB).
        ray_init_config (dict, optional): ``ray.init`` arguments, if Ray is not running yet.
        start_timeout (float): seconds to wait for the actor to be placed and built (default
            120, as the collectors'; ``actor_start_timeout`` is its deprecated name).
        call_timeout (float): seconds any one call may take.

    ``dumps(path)`` and ``loads(path)`` read and write ``path`` on the actor's node.

    Examples:
        >>> import torch
        >>> from tensordict import TensorDict
        >>> from reap import LazyTensorStorage, RayReplayBuffer
        >>> with RayReplayBuffer(storage=LazyTensorStorage(100), batch_size=8) as rb:
        ...     _ = rb.extend(TensorDict({"x": torch.arange(10)}, [10]))
        ...     print(len(rb), rb.sample()["x"].shape)
        10 torch.Size([8])
    """

    def __init__(self, *, storage=None, sampler=None, writer=None, batch_size: int | None = None,
                 replay_buffer_cls=None, remote_config: dict | None = None,
                 ray_init_config: dict | None = None, start_timeout: float = START_TIMEOUT,
                 call_timeout: float = 60.0, actor_start_timeout: float | None = None, **kwargs):
        owner = "RayReplayBuffer"
        start_timeout = renamed("actor_start_timeout", actor_start_timeout, "start_timeout", start_timeout,
                                START_TIMEOUT, owner)
        start_timeout = checked_seconds(start_timeout, "start_timeout", owner)
        self.call_timeout = checked_seconds(call_timeout, "call_timeout", owner)
        if replay_buffer_cls is None:
            from reap_replay import ReplayBuffer

            replay_buffer_cls = ReplayBuffer
        if not callable(replay_buffer_cls):
            raise TypeError(f"{owner}: replay_buffer_cls must be a buffer class, got {replay_buffer_cls!r}")
        config = actor_options(remote_config, owner, "remote_config")
        self.remote_config = config  # the actor's options: what it holds while it lives
        self.started_ray = ensure_ray(ray_init_config)
        check_placeable([config], owner)
        kwargs.update(storage=storage, sampler=sampler, writer=writer, batch_size=batch_size)
        cls = ray.remote(ReplayBufferActor).options(max_restarts=0, **config)
        self.actor = cls.remote(replay_buffer_cls, kwargs)
        self._closed = False
        self._finalizer = weakref.finalize(self, kill_actors, [self.actor], 2.0)
        try:
            ready = self.actor.ready.remote()
            wait_ready([ready], [config], start_timeout, owner)
            self.node_id = ray.get(ready, timeout=start_timeout)
        except BaseException:
            self.shutdown()
            raise

    def _call(self, method: str, *args, **kwargs):
        if self._closed:
            raise RuntimeError(f"RayReplayBuffer.{method}: the buffer was shut down")
        ref = self.actor.call.remote(method, *args, **kwargs)
        try:
            return ray.get(ref, timeout=self.call_timeout)
        except GetTimeoutError:
            raise TimeoutError(
                f"RayReplayBuffer.{method} got no answer from the buffer's actor within "
                f"{self.call_timeout:.0f} s (call_timeout)"
            ) from None
        except RayActorError as exc:
            raise RuntimeError(f"RayReplayBuffer.{method}: the buffer's actor died: {exc}") from exc

    def extend(self, data):
        """Writes ``data`` (items along its first dim); returns their indices."""
        return self._call("extend", data)

    def add(self, data):
        """Writes one item; returns its index."""
        return self._call("add", data)

    def sample(self, batch_size: int | None = None, return_info: bool = False):
        """Samples ``batch_size`` items (the buffer's ``batch_size`` by default)."""
        return self._call("sample", batch_size, return_info=return_info)

    def update_priority(self, index, priority=None) -> None:
        """Sets the priorities of the items at ``index`` (prioritized buffers)."""
        args = (index,) if priority is None else (index, priority)
        self._call("update_priority", *args)

    def update_priorities(self, index, priority=None) -> None:
        """Alias of :meth:`update_priority`."""
        self.update_priority(index, priority)

    def empty(self, empty_write_count: bool = True) -> None:
        """Removes every item."""
        self._call("empty", empty_write_count)

    def dumps(self, path) -> None:
        """Writes a checkpoint to ``path`` on the actor's node."""
        self._call("dumps", str(path))

    def loads(self, path) -> None:
        """Loads the checkpoint at ``path`` on the actor's node."""
        self._call("loads", str(path))

    def state_dict(self) -> dict:
        return self._call("state_dict")

    def load_state_dict(self, state_dict: dict) -> None:
        self._call("load_state_dict", state_dict)

    def __len__(self) -> int:
        return self._call("__len__")

    def __getitem__(self, index):
        """The stored items at ``index`` (int, slice or tensor of indices), as the buffer reads them."""
        return self._call("__getitem__", index)

    def shutdown(self, timeout: float = 10.0) -> None:
        """Kills the buffer's actor (and its data); safe to call twice."""
        if self.__dict__.get("_closed", True):
            return
        self._closed = True
        self._finalizer.detach()
        kill_actors([self.actor], timeout)

    close = shutdown

    def __enter__(self):
        return self

    def __exit__(self, *exc) -> None:
        self.shutdown()

    def __repr__(self) -> str:
        return f"RayReplayBuffer(actor={self.actor._actor_id.hex()[:8]}, closed={self._closed})"
