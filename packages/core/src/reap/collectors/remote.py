"""``RemoteCollectorBase``: the driver of collectors whose workers answer one request per batch.

RayCollector (Ray actors), RPCCollector and DistributedCollector (torch.distributed ranks)
share everything here and add only their transport: how a collect request reaches a worker,
how its answer comes back, how a control call (``set_seed``...) is made. Each worker runs a
:class:`~reap.collectors.worker.CollectorWorker`; which weights it should run is
:class:`~reap.collectors.bookkeeping.WorkerWeights`.

The driver keeps at most one request in flight per worker:

* ``sync=True`` asks every worker for a part of each batch and combines the parts in worker
  order (the transport says how: stacked or concatenated).
* ``sync=False`` yields each worker's batch as it arrives, asking that worker for its next batch
  before yielding (after yielding with ``update_after_each_batch``, so that the trainer's new
  weights travel with that request).

Prefetching (async mode): a request also tells the worker to start its next rollout as soon as
it has handed its batch back (:meth:`CollectorWorker.serve_collect`), so the next request finds
it done or under way, as reap's ``MultiAsyncCollector`` double-buffers. Weights given while that
rollout runs reach the rollout after it (one batch later than without prefetching), and a
batch's ``("collector", "policy_version")`` always names the weights it was collected with.
``max_weight_update_interval=k`` keeps TorchRL's rule (fresh weights for a worker that
delivered more than ``k`` batches on its own), and the prefetched rollout counts: a worker due
for fresh weights gets them with the request before the rollout that would be one too many, so
no worker collects more than ``k + 1`` batches on the same weights, prefetching or not.
``update_after_each_batch=True`` and ``max_weight_update_interval=0`` (every batch on the latest
weights) switch prefetching off, as do the last requests of an iteration: once the frames still
wanted are all in flight before a worker's turn comes again, it starts no rollout that no
request would fetch. ``set_seed`` and ``load_state_dict`` drop prefetched rollouts (they
predate the seed or the state); ``pause()`` waits for them to end, so inside it no worker
collects.

A subclass calls :meth:`_init_requests` in its ``__init__`` and implements
:meth:`_send_collect`, :meth:`_first_finished`, :meth:`_busy_workers`, :meth:`_call`,
:meth:`_pack_weights` and ``num_collectors``; :meth:`_output`, :meth:`_combine` and
:meth:`_call_all` have defaults to override.
"""

from __future__ import annotations

import contextlib
import inspect
from collections import deque
from collections.abc import Callable

import torch

from reap.collectors.arguments import (
    check_collector_kwargs,
    check_int,
    check_torchrl_kwargs,
    checked_worker_ids,
)
from reap.collectors.base import BaseCollector, check_frames
from reap.collectors.bookkeeping import WorkerWeights
from reap.collectors.collector import Collector
from reap.collectors.worker import per_collector, worker_seed
from reap.envs.base import EnvBase
from reap.plugins import hook
from reap.weight_update import match_weights, weights_from_update_args


class RemoteCollectorBase(BaseCollector):
    """Requests, prefetching, weights and iteration of a remote collector's driver.

    Examples:
        A backend's driver, here with its "workers" in the driver's own process (a real one
        sends the requests to other processes and waits for their answers):

        >>> import torch
        >>> from tensordict.nn import TensorDictModule
        >>> from reap import Collector, GymEnv
        >>> from reap.collectors.worker import CollectorWorker
        >>> class InProcess(RemoteCollectorBase):
        ...     def __init__(self, n, policy):
        ...         self.policy = policy
        ...         self.workers = [CollectorWorker(i, Collector(GymEnv("Pendulum-v1"), policy,
        ...                                                       frames_per_batch=4)) for i in range(n)]
        ...         self.answers = []
        ...         self._init_requests(n, 4, sync=True, total_frames=16)
        ...         self._closed = False
        ...     num_collectors = property(lambda self: len(self.workers))
        ...     def _send_collect(self, idx, weights, version, prefetch):
        ...         self.answers.append((idx, self.workers[idx].serve_collect(weights, version)))
        ...     def _first_finished(self):
        ...         return self.answers.pop(0)
        ...     def _busy_workers(self):
        ...         return {idx for idx, _ in self.answers}
        ...     def _call(self, idx, method, args):
        ...         return getattr(self.workers[idx], method)(*args)
        ...     def _pack_weights(self, weights):
        ...         return weights
        ...     def shutdown(self):
        ...         self._closed = True
        ...         for worker in self.workers:
        ...             worker.close()
        >>> policy = TensorDictModule(torch.nn.Linear(3, 1), in_keys=["observation"], out_keys=["action"])
        >>> collector = InProcess(2, policy)
        >>> [batch.batch_size for batch in collector]  # 2 workers x 4 steps, 16 frames
        [torch.Size([2, 4]), torch.Size([2, 4])]
        >>> collector.update_policy_weights_(policy, worker_ids=[1])
        >>> collector.policy_version
        1
        >>> collector.shutdown()
    """

    _combine_dim: int | None = None  # sync parts: None stacks them (a new leading dim), else cat on this dim
    #: the backend's weight updater (its ``push_weights`` calls :meth:`_push_weights`); None: direct
    weight_updater = None

    def _init_requests(self, num_workers: int, frames_per_worker: int, *, sync: bool, total_frames: int,
                       update_after_each_batch: bool = False, max_weight_update_interval: int = -1) -> None:
        """The driver's state for ``num_workers`` workers asked ``frames_per_worker`` frames each."""
        self._sync = sync
        self.total_frames = total_frames
        self.update_after_each_batch = bool(update_after_each_batch)
        self._frames_per_worker = frames_per_worker
        # per worker: the weights it should run, the version it was sent, batches since
        self._worker_weights = WorkerWeights(
            num_workers, max_interval=0 if update_after_each_batch else max_weight_update_interval)
        self._ahead = [False] * num_workers  # a prefetched rollout is under way (or done)
        self._skip = [False] * num_workers  # the next batch predates the weights just sent
        self._ready: deque = deque()  # (worker index, answer) drained by pause() or a control call
        self._frames = 0
        self._iter = 0
        self._seed: tuple[int, bool] | None = None
        self._weights_layout = None  # the policy's weights on the meta device: what pushes must match
        self._hook_started = False

    def _add_worker(self) -> None:
        self._worker_weights.add_worker()
        self._ahead.append(False)
        self._skip.append(False)

    # ---- the transport (subclasses) --------------------------------------------------------
    def _send_collect(self, idx: int, weights, version: int, prefetch: bool) -> None:
        """Send worker ``idx`` a collect request carrying ``weights`` (None: keep its own) and
        ``version``; with ``prefetch`` it starts its next rollout once it answers."""
        raise NotImplementedError

    def _first_finished(self) -> tuple[int, object]:
        """Wait (bounded) for the first request in flight to finish: ``(worker index, answer)``,
        or raise the worker's error."""
        raise NotImplementedError

    def _busy_workers(self) -> set[int]:
        """The workers with a request in flight."""
        raise NotImplementedError

    def _call(self, idx: int, method: str, args: tuple):
        """Call ``CollectorWorker.<method>(*args)`` on worker ``idx`` and return its answer."""
        raise NotImplementedError

    def _call_all(self, method: str, args_for: Callable[[int], tuple], among=None) -> list:
        """:meth:`_call` on every worker (``among``: those), once no collect request is in
        flight (their answers are kept for the next iteration). Answers in worker order."""
        self._check_open()
        self._drain()
        ids = range(self.num_collectors) if among is None else among
        return [self._call(i, method, args_for(i)) for i in ids]

    def _pack_weights(self, weights):
        """The weights (a TensorDict laid out as the policy's) as a request carries them."""
        raise NotImplementedError

    def _output(self, answer) -> tuple[int, object]:
        """``(frames, what the iterator yields)`` for one async answer."""
        return answer.numel(), answer

    def _combine(self, answers: list) -> tuple[int, object]:
        """``(frames, what the iterator yields)`` for one sync batch's answers, in worker order."""
        batch = torch.stack(answers, 0) if self._combine_dim is None else torch.cat(answers, self._combine_dim)
        return batch.numel(), batch

    # ---- properties -------------------------------------------------------------------------
    @property
    def frames(self) -> int:
        """Frames yielded so far."""
        return self._frames

    @property
    def policy_version(self) -> int:
        """The version of the weights pushed last (0: the workers' initial weights)."""
        return self._worker_weights.version

    @property
    def max_weight_update_interval(self) -> int:
        """``k``: no worker collects more than ``k`` batches after its last update (-1: no bound)."""
        return self._worker_weights.max_interval

    @max_weight_update_interval.setter
    def max_weight_update_interval(self, value: int) -> None:
        self._worker_weights.max_interval = value

    # ---- weights ----------------------------------------------------------------------------
    def update_policy_weights_(self, policy_or_weights=None, *, worker_ids=None, model_id=None,
                               weights_dict=None, **kwargs) -> None:
        """Send new weights to every worker (or to ``worker_ids``, 0-based) with its next request.

        Accepts a module, a TensorDict, a state dict, ``weights_dict={"policy": ...}`` or the
        keywords ``policy=``/``weights=``; with none, the central ``policy`` is the source (and
        with ``policy_factory`` and no central policy, nothing is sent until weights are given).
        A worker loads them before a rollout, never during one.
        """
        weights = weights_from_update_args(policy_or_weights, model_id=model_id, weights_dict=weights_dict, **kwargs)
        if self.weight_updater is None:
            self._push_weights(weights, worker_ids)
        else:
            self.weight_updater.push_weights(weights, worker_ids=worker_ids)

    def _push_weights(self, weights, worker_ids) -> None:
        """The weight updater's push: ``weights`` (None: the central policy) for ``worker_ids``."""
        self._check_open()
        ids = checked_worker_ids(worker_ids, self.num_collectors)
        if weights is None:
            weights = self.policy
        if weights is None:  # policy_factory and no central policy: nothing to send yet
            return
        if self._weights_layout is not None:
            try:
                weights = match_weights(self._weights_layout, weights)  # exact shapes, lossless dtypes only
            except ValueError as exc:
                raise ValueError(f"update_policy_weights_: {exc}") from None
        self._worker_weights.push(self._pack_weights(weights), ids)

    # ---- requests ---------------------------------------------------------------------------
    def _prefetch(self) -> bool:
        """Whether the request about to be sent should start the worker's next rollout after it."""
        # a rollout started now is fetched only if this worker is asked again: in turn, after
        # every other worker, so only while that many more batches are still wanted
        return (not self._sync and not self.update_after_each_batch and self._worker_weights.max_interval != 0
                and self._more(self._in_flight_frames() + self.num_collectors * self._frames_per_worker))

    def _submit(self, idx: int) -> None:
        prefetch = self._prefetch()
        weights = self._worker_weights
        k = weights.max_interval
        # a prefetching request starts one more rollout on the weights it leaves the worker with:
        # the batch after it must not be one too many on them either
        due = (k >= 0 and prefetch and weights.batches_since_update(idx) + 1 > k) or weights.due([idx])
        if self.policy is not None and due:
            self._push_weights(self.policy, [idx])
        payload, version = weights.next_request(idx)
        # the batch this request returns was started before these weights arrive: it does not
        # count as a batch on them
        self._skip[idx] = self._ahead[idx] and payload is not None
        self._ahead[idx] = prefetch
        self._send_collect(idx, payload, version, prefetch)

    def _delivered(self, idx: int) -> None:
        if self._skip[idx]:
            self._skip[idx] = False
        else:
            self._worker_weights.delivered(idx)

    def _next_result(self) -> tuple[int, object]:
        """The next answer: one drained earlier, else the first request to finish."""
        if self._ready:
            return self._ready.popleft()
        return self._first_finished()

    def _drain(self) -> None:
        """Wait for every request in flight; keep their answers for the next iteration."""
        while self._busy_workers():
            self._ready.append(self._first_finished())

    def _settle(self, drop: bool = False) -> None:
        """Wait for the workers' prefetched rollouts to end (``drop``: and discard them)."""
        ids = [i for i, ahead in enumerate(self._ahead) if ahead]
        if ids:
            self._call_all("settle", lambda i: (drop,), among=ids)
        if drop:
            for i in ids:
                self._ahead[i] = False

    # ---- iteration --------------------------------------------------------------------------
    def _more(self, extra: int = 0) -> bool:
        return self.total_frames == -1 or self._frames + extra < self.total_frames

    def _in_flight_frames(self) -> int:
        return (len(self._busy_workers()) + len(self._ready)) * self._frames_per_worker

    def _pending(self) -> set[int]:
        return self._busy_workers() | {i for i, _ in self._ready}

    def iterator(self):
        self._check_open()
        if not self._hook_started:
            self._hook_started = True
            hook().reap_collector_start(collector=self, worker_idx=-1)
        yield from (self._sync_iterator() if self._sync else self._async_iterator())

    def _sync_iterator(self):
        while self._more():
            self._check_open()
            n = self.num_collectors
            pending = self._pending()
            for i in range(n):
                if i not in pending:
                    self._submit(i)
            answers = {}
            while len(answers) < n:
                idx, answer = self._next_result()
                self._delivered(idx)
                answers[idx] = answer
            frames, out = self._combine([answers[i] for i in range(n)])
            self._frames += frames
            self._iter += 1
            yield out

    def _async_iterator(self):
        pending = self._pending()
        for i in range(self.num_collectors):
            if i not in pending and self._more(self._in_flight_frames()):
                self._submit(i)
        while self._more():
            self._check_open()
            idx, answer = self._next_result()
            self._delivered(idx)
            frames, out = self._output(answer)
            self._frames += frames
            self._iter += 1
            if self.update_after_each_batch:  # the trainer's step first, then the new weights go
                yield out
                if not self._closed and self._more(self._in_flight_frames()):
                    self._submit(idx)
                continue
            if self._more(self._in_flight_frames()):
                self._submit(idx)
            yield out

    @contextlib.contextmanager
    def pause(self):
        """Drain the requests in flight (their batches are kept for the next iteration) and wait
        for prefetched rollouts: inside the block no worker collects (:meth:`start`'s thread
        waits too)."""
        self._check_open()
        with self._background_lock():
            self._drain()
            self._settle()
            yield None

    # ---- control ----------------------------------------------------------------------------
    def set_seed(self, seed: int, static_seed: bool = False) -> list:
        """Seed every worker (worker ``i`` gets :func:`~reap.collectors.worker.worker_seed`
        ``(seed, i)`` unless ``static_seed``); returns their answers."""
        if isinstance(seed, bool) or not isinstance(seed, int):
            raise TypeError(f"set_seed: seed must be an int, got {seed!r}")
        self._check_open()
        self._seed = (seed, static_seed)
        answers = self._call_all("set_seed", lambda i: (seed if static_seed else worker_seed(seed, i), static_seed))
        self._ahead = [False] * len(self._ahead)  # each worker dropped its prefetched rollout
        return answers

    def state_dict(self) -> list[dict]:
        """One state dict per worker (TorchRL's layout)."""
        return self._call_all("state_dict", lambda i: ())

    def load_state_dict(self, state_dict) -> None:
        """Load a list with one state per worker (or one state for all)."""
        self._check_open()
        states = state_dict if isinstance(state_dict, list) else [state_dict] * self.num_collectors
        if len(states) != self.num_collectors:
            raise ValueError(f"load_state_dict: got {len(states)} states for {self.num_collectors} collectors")
        self._call_all("load_state_dict", lambda i: (states[i],))
        self._ahead = [False] * len(self._ahead)  # each worker dropped its prefetched rollout


#: The device arguments a remote collector takes as one value or one per collector.
DEVICES = ("device", "storing_device", "env_device", "policy_device")


def check_remote_arguments(*, frames_per_batch, total_frames, sync, num_workers_per_collector,
                           max_weight_update_interval, policy, policy_factory, postproc, owner: str) -> None:
    """The checks every remote collector makes on TorchRL's common arguments, with messages that
    name the argument and the fix.

    Examples:
        >>> check_remote_arguments(frames_per_batch=8, total_frames=-1, sync=False, num_workers_per_collector=1,
        ...                        max_weight_update_interval=-2, policy=None, policy_factory=None,
        ...                        postproc=None, owner="MyCollector")
        Traceback (most recent call last):
        ...
        ValueError: MyCollector: max_weight_update_interval must be -1 (no forced update) or a non-negative int, got -2
    """
    if not isinstance(sync, bool):
        raise TypeError(f"{owner}: sync must be True or False, got {sync!r}")
    check_frames(frames_per_batch, total_frames, owner)
    check_int(num_workers_per_collector, "num_workers_per_collector", owner, allow_none=False)
    if isinstance(max_weight_update_interval, bool) or not isinstance(max_weight_update_interval, int) or (
            max_weight_update_interval < -1):
        raise ValueError(f"{owner}: max_weight_update_interval must be -1 (no forced update) or a non-negative "
                         f"int, got {max_weight_update_interval!r}")
    if policy is not None and policy_factory is not None:
        raise ValueError(f"{owner}: pass policy or policy_factory, not both")
    for factory in policy_factory if isinstance(policy_factory, list) else [policy_factory]:
        if factory is not None and not callable(factory):
            raise TypeError(f"{owner}: policy_factory must be callable, got {factory!r}")
    if postproc is not None and not callable(postproc):
        raise TypeError(f"{owner}: postproc must be callable, got {postproc!r}")


def split_per_collector(per_collector_args: dict, *, num_collectors: int | None, num_workers: int | None,
                        frames_per_batch: int, sync: bool, owner: str) -> tuple[int, dict]:
    """How many remote collectors there are, and each per-collector argument as a list of them.

    ``num_collectors`` (TorchRL's tutorial) or ``num_workers`` (``Collector(backend=...,
    num_workers=K)``) gives the number; else the lists' common length (1 without lists).

    Examples:
        >>> from reap import GymEnv
        >>> n, lists = split_per_collector({"create_env_fn": [GymEnv] * 2, "collector_kwargs": None},
        ...                                num_collectors=None, num_workers=None, frames_per_batch=8,
        ...                                sync=True, owner="MyCollector")
        >>> n, lists["collector_kwargs"]
        (2, [None, None])
    """
    if num_workers is not None:
        if num_collectors is not None and num_collectors != num_workers:
            raise ValueError(f"{owner}: num_workers={num_workers} and num_collectors={num_collectors} differ")
        num_collectors = num_workers
    check_int(num_collectors, "num_collectors", owner)
    lengths = {name: len(v) for name, v in per_collector_args.items() if isinstance(v, list)}
    if num_collectors is None:
        if len(set(lengths.values())) > 1:
            raise ValueError(f"{owner}: per-collector lists of different lengths: {lengths}")
        num_collectors = next(iter(lengths.values()), 1)
    n = num_collectors
    if n == 0:
        raise ValueError(f"{owner}: create_env_fn is an empty list; pass one env constructor per collector")
    lists = {name: per_collector(v, n, name, owner) for name, v in per_collector_args.items()}
    for fn in lists["create_env_fn"]:
        if not (isinstance(fn, EnvBase) or callable(fn)):
            raise TypeError(f"{owner}: create_env_fn must be an env or a callable returning one, got {fn!r}")
    for kw in lists.get("collector_kwargs", ()):
        if kw is not None and not isinstance(kw, dict):
            raise TypeError(f"{owner}: collector_kwargs must be a dict (or a list of dicts), got {kw!r}")
    if sync and frames_per_batch % n:
        raise ValueError(f"{owner}: sync=True splits frames_per_batch={frames_per_batch} evenly across {n} "
                         f"collectors; pass a multiple of {n}")
    return n, lists


def check_collector_options(options: dict, collector_class, owner: str) -> None:
    """Refuse on the driver, before any worker starts, the options the workers' reap
    ``Collector`` (or a subclass) would refuse once started: an unknown name, a TorchRL feature
    reap lacks, a value it refuses (:func:`~reap.collectors.arguments.check_collector_kwargs`).

    Examples:
        >>> check_collector_options({"split_trajs": True, "trust_policy": True}, Collector, "X")
        >>> check_collector_options({"split_traj": True}, Collector, "X")
        Traceback (most recent call last):
        ...
        TypeError: X: unexpected keyword argument 'split_traj'
        >>> check_collector_options({"max_frames_per_traj": 0}, Collector, "X")
        Traceback (most recent call last):
        ...
        ValueError: X: max_frames_per_traj must be a positive int or None, got 0
    """
    if collector_class is Collector:
        own = inspect.signature(Collector.__init__).parameters
        check_torchrl_kwargs({k: v for k, v in options.items() if k not in own}, owner)
    if isinstance(collector_class, type) and issubclass(collector_class, Collector):
        check_collector_kwargs(options, owner)


def remote_collector_kwargs(common: dict, *, create_env_fn, collector_class, num_envs: int = 1,
                            devices: dict | None = None, collector_kwargs: dict | None = None,
                            policy_factory=None, owner: str) -> dict:
    """The keyword arguments of one remote collector: ``common`` (frames, options), its devices
    (those not None), its ``collector_kwargs``, its env constructor (``num_envs`` of them for a
    multi-process ``collector_class`` or several envs), ``total_frames=-1`` and its ``policy_factory``.

    Examples:
        >>> from reap import GymEnv
        >>> remote_collector_kwargs({"frames_per_batch": 8}, create_env_fn=GymEnv, collector_class=Collector,
        ...                         devices={"device": None}, collector_kwargs={"split_trajs": True}, owner="X")
        {'frames_per_batch': 8, 'split_trajs': True, 'create_env_fn': <class 'reap.envs.gym.GymEnv'>, 'total_frames': -1}
    """
    kwargs = dict(common)
    kwargs.update({name: value for name, value in (devices or {}).items() if value is not None})
    kwargs.update(collector_kwargs or {})
    check_collector_options(kwargs, collector_class, owner)
    if num_envs > 1 or not issubclass(collector_class, Collector):
        if isinstance(create_env_fn, EnvBase):
            raise TypeError(f"{owner}: with num_workers_per_collector > 1 or a multi-process collector_class, "
                            "create_env_fn must be callables, not env instances")
        create_env_fn = [create_env_fn] * num_envs
    kwargs["create_env_fn"] = create_env_fn
    kwargs["total_frames"] = -1  # the driver counts the frames; a worker collects until it is stopped
    if policy_factory is not None:
        kwargs["policy_factory"] = policy_factory
    return kwargs


__all__ = ["DEVICES", "RemoteCollectorBase", "check_collector_options", "check_remote_arguments",
           "remote_collector_kwargs", "split_per_collector"]
