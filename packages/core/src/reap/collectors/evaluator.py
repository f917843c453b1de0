"""``Evaluator``: TorchRL's evaluation runner, on reap's collectors.

An :class:`Evaluator` holds an evaluation env and policy and, on request, plays
``num_trajectories`` whole episodes with the policy's deterministic actions, then reports their
mean return and length (``{"eval/reward": ..., "eval/episode_length": ..., ...}``). It runs
in the caller's thread (:meth:`Evaluator.evaluate`) or in the background
(:meth:`Evaluator.trigger_eval`, then :meth:`~Evaluator.poll` or :meth:`~Evaluator.wait`),
with the trainer's latest weights copied in first. Where the episodes are played is the
``backend``: ``"thread"`` (a :class:`~reap.collectors.Collector` in this process),
``"process"`` (a one-worker ``MultiSyncCollector``: reap-collectors-mp) or ``"ray"`` (a
``RayEvalWorker`` actor: reap-collectors-ray).

The episodes are regrouped from the collector's ``frames_per_batch`` batches as
``trajs_per_batch`` regroups them (:class:`~reap.collectors.traj_batches.TrajectoryBatches`),
and each evaluation starts from a reset, so no episode spans two evaluations or two sets of
weights. ``VecNorm``/``VecNormV2`` transforms of the eval env are frozen: evaluation reads the
running statistics and never updates them (share them with the training envs, through
``EnvCreator`` or ``load_state_dict``: frozen before it saw any data, a VecNorm normalises to
NaN, as TorchRL's does).

Examples:
    >>> import torch
    >>> from tensordict.nn import TensorDictModule
    >>> from reap.envs import GymEnv
    >>> env = GymEnv("Pendulum-v1")
    >>> policy = TensorDictModule(torch.nn.Linear(3, 1), in_keys=["observation"], out_keys=["action"])
    >>> with Evaluator(env, policy, num_trajectories=2, max_steps=20) as evaluator:
    ...     metrics = evaluator.evaluate(step=0)
    >>> sorted(metrics)
    ['eval/episode_length', 'eval/fps', 'eval/num_episodes', 'eval/reward', 'eval/reward_std', 'eval/step']
    >>> metrics["eval/num_episodes"], metrics["eval/episode_length"]
    (2, 20.0)
"""

from __future__ import annotations

import contextlib
import functools
import threading
import time
import warnings
from collections import deque
from collections.abc import Callable, Mapping

import torch
from tensordict import TensorDict, TensorDictBase

from reap.collectors.arguments import check_int, checked_exploration_type, round_up
from reap.collectors.collector import counts_steps
from reap.collectors.interruptor import Interruptor
from reap.collectors.traj_batches import TrajectoryBatches
from reap.envs.base import EnvBase
from reap.envs.utils import ExplorationType
from reap.weight_update import WeightStrategy

BACKENDS = ("thread", "process", "ray")
BUSY_POLICIES = ("skip", "error", "queue")
#: the collector arguments the Evaluator sets itself, and the Evaluator argument for each
_OWN_COLLECTOR_ARGS = {
    "create_env_fn": "env", "policy": "policy", "policy_factory": "policy_factory",
    "frames_per_batch": "frames_per_batch", "total_frames": None, "max_frames_per_traj": "max_steps",
    "trajs_per_batch": "num_trajectories", "exploration_type": "exploration_type", "interruptor": None,
}
#: where ``RewardSum`` keeps the episode's return (TorchRL's default out key)
EPISODE_REWARD_KEY = ("next", "episode_reward")
STEP_COUNT_KEY = ("next", "step_count")
_METRICS = ("reward", "reward_std", "num_episodes", "episode_length", "fps")


class _Cancelled(Exception):
    """The Evaluator shut down while an evaluation ran."""


class Evaluator:
    """Plays whole episodes with a policy and reports their return: TorchRL's ``Evaluator``.

    Args:
        env: the eval env, or a callable that makes it (required by the ``"process"`` and
            ``"ray"`` backends, which make it in the worker; with ``policy_factory``, the
            ``"thread"`` backend makes both at the first evaluation, in the thread that runs it).
        policy: the policy to evaluate; or

    Keyword Args:
        policy_factory: ``policy_factory(env)`` makes the policy (pass it or ``policy``, not both).
        num_trajectories (int): episodes per evaluation. Default: 10.
        max_steps (int, optional): an episode is cut (truncated) after this many steps. An env
            that counts its steps already (``StepCounter``) keeps its own limit.
        frames_per_batch (int, optional): env steps per collector batch (default ``max_steps``,
            else 1000), rounded up to a multiple of the env's batch size; it sets how often a
            shutdown is noticed, not what is reported.
        collector_cls: the in-process collector class (or its name in ``reap.collectors``).
        collector_kwargs (dict, optional): more arguments for the collector.
        weight_sync_schemes (dict, optional): ``{"policy": scheme}`` for the worker's collector;
            given with the ``"thread"`` backend, the collector runs in a worker process as with
            ``backend="process"``.
        log_prefix (str): the metrics' prefix. Default: ``"eval"``.
        reward_keys: the reward entry, summed over each episode when the env has no
            ``RewardSum`` (whose ``("next", "episode_reward")`` is read first). Several entries a
            step (agents) count their sum. Default: ``("next", "reward")``.
        done_keys: TorchRL's argument; episodes end where the env's done flags say, as in
            every reap collector, so it changes nothing.
        device: where weights passed to :meth:`evaluate` are moved (default: the policy's).
        exploration_type: the policy's exploration during evaluation. Default: deterministic.
        metrics_fn: ``metrics_fn(trajectories) -> {name: value}``, more metrics from each
            evaluation's padded ``[num_trajectories, longest]`` batch.
        dump_video (bool): after each evaluation, call ``dump(step=...)`` on the eval env's
            transforms that have one (a video recorder); in-process backend only. Default: True.
        on_result: ``on_result(metrics)`` after each evaluation, with a TensorDict of the metrics;
            an exception it raises becomes a warning.
        busy_policy (str): what :meth:`trigger_eval` does while an evaluation is pending:
            ``"skip"`` (return False, the default), ``"error"`` (raise) or ``"queue"`` (run it next).
        backend (str): ``"thread"`` (default), ``"process"`` or ``"ray"``.
        init_fn: called first in the worker process (``"process"``, ``"ray"``).
        num_gpus (int): GPUs of the Ray actor. Default: 1.
        ray_kwargs (dict, optional): more ``ray.remote`` options for the Ray actor.

    ``shutdown()`` (or leaving a ``with`` block) stops an evaluation that is running (its env
    steps stop at once), joins the evaluation thread and shuts the collector down.
    """

    def __init__(self, env: EnvBase | Callable[[], EnvBase], policy=None, *, policy_factory=None,
                 num_trajectories: int = 10, max_steps: int | None = None, frames_per_batch: int | None = None,
                 collector_cls=None, collector_kwargs: dict | None = None, weight_sync_schemes: dict | None = None,
                 log_prefix: str = "eval", reward_keys=("next", "reward"), done_keys=("next", "done"),
                 device=None, exploration_type=ExplorationType.DETERMINISTIC, metrics_fn=None,
                 dump_video: bool = True, on_result=None, busy_policy: str = "skip", backend: str = "thread",
                 init_fn=None, num_gpus: int = 1, ray_kwargs: dict | None = None):
        if busy_policy not in BUSY_POLICIES:
            raise ValueError(f"Unknown busy_policy {busy_policy!r}. Choose 'skip', 'error' or 'queue'.")
        if backend not in BACKENDS:
            raise ValueError(f"Unknown backend {backend!r}. Choose 'thread', 'process', or 'ray'.")
        check_int(num_trajectories, "num_trajectories", "Evaluator")
        check_int(max_steps, "max_steps", "Evaluator")
        check_int(frames_per_batch, "frames_per_batch", "Evaluator")
        if policy is not None and policy_factory is not None:
            raise ValueError("Evaluator: pass policy or policy_factory, not both")
        remote = backend == "ray" or backend == "process" or weight_sync_schemes is not None
        if remote and (isinstance(env, EnvBase) or not callable(env)):
            raise ValueError(f"Evaluator(backend={backend!r}): env must be a callable that makes the env (it is "
                             "made in the worker process), not an env")
        if remote and policy_factory is None:
            raise ValueError(f"Evaluator(backend={backend!r}): pass policy_factory (a callable env -> policy); "
                             "the policy is made in the worker process")
        if policy is None and policy_factory is None:
            raise ValueError("Evaluator: a policy or a policy_factory (a callable env -> policy) must be provided")
        self.log_prefix = log_prefix
        self.busy_policy = busy_policy
        self.backend = backend
        self.metrics_fn = metrics_fn
        self.on_result = on_result
        self.dump_video = dump_video
        self.reward_keys = reward_keys
        self.done_keys = done_keys
        self._step_counter = 0
        options = dict(num_trajectories=num_trajectories, max_steps=max_steps, reward_keys=reward_keys,
                       metrics_fn=metrics_fn, exploration_type=checked_exploration_type(exploration_type, "Evaluator"))
        if backend == "ray":
            self._run = _RayRun(env, policy_factory, init_fn=init_fn, num_gpus=num_gpus,
                                ray_kwargs=ray_kwargs or {}, **options)
        else:
            collector_kwargs = _checked_collector_kwargs(collector_kwargs)
            self._run = CollectorEvaluation(env, policy, policy_factory, remote=remote, frames_per_batch=frames_per_batch,
                                      collector_cls=collector_cls, collector_kwargs=collector_kwargs,
                                      weight_sync_schemes=weight_sync_schemes, device=device, init_fn=init_fn,
                                      **options)
        self._lock = threading.Condition()
        self._run_lock = threading.Lock()  # one evaluation at a time (evaluate() beside a triggered one)
        self._requests: deque = deque()
        self._results: deque = deque()
        self._running = False
        self._closed = False
        self._thread: threading.Thread | None = None

    def __repr__(self) -> str:
        return (f"Evaluator(backend={self.backend!r}, num_trajectories={self._run.num_trajectories}, "
                f"max_steps={self._run.max_steps}, busy_policy={self.busy_policy!r}, pending={self.pending})")

    # ---- evaluations --------------------------------------------------------------------------
    def evaluate(self, weights=None, step: int | None = None, *, weights_dict: dict | None = None) -> dict:
        """Play the episodes now, in this thread, and return the metrics.

        ``weights`` (a module, a TensorDict of its parameters or a state dict) or
        ``weights_dict={"policy": ...}`` are loaded into the eval policy first; ``step`` is the
        logging step reported as ``"<prefix>/step"`` (default: a counter of evaluations).
        """
        self._check_open()
        weights = self._prepared(weights, weights_dict)
        step = self._next_step(step)
        result = self._evaluate(weights, step)
        self._call_back(result)
        return result

    def trigger_eval(self, weights=None, step: int | None = None, *, weights_dict: dict | None = None) -> bool:
        """Start an evaluation in the background (arguments as :meth:`evaluate`); collect its
        metrics with :meth:`poll` or :meth:`wait`. Returns False when one is pending already and
        ``busy_policy="skip"``; raises with ``busy_policy="error"``; queues with ``"queue"``."""
        self._check_open()
        weights = self._prepared(weights, weights_dict)
        step = self._next_step(step)
        with self._lock:
            if self._running or self._requests:
                if self.busy_policy == "error":
                    raise RuntimeError("Evaluator.trigger_eval: an evaluation is pending already; wait() for it, "
                                       "or build the Evaluator with busy_policy='skip' or busy_policy='queue'")
                if self.busy_policy == "skip":
                    return False
            self._requests.append((weights, step))
            if self._thread is None:
                self._thread = threading.Thread(target=self._serve, name="evaluator-async", daemon=True)
                self._thread.start()
            self._lock.notify_all()
        return True

    def poll(self, timeout: float = 0) -> dict | None:
        """The metrics of the oldest finished background evaluation, waiting up to ``timeout``
        seconds for one; None if none finished. An evaluation that failed raises its error here."""
        return self._take(timeout)

    def wait(self, timeout: float | None = None) -> dict | None:
        """As :meth:`poll`, waiting up to ``timeout`` seconds (None: until one finishes). Returns
        None at once when no evaluation is pending or finished."""
        return self._take(timeout)

    @property
    def pending(self) -> bool:
        """Whether a background evaluation is running or queued."""
        with self._lock:
            return self._running or bool(self._requests)

    # ---- state ---------------------------------------------------------------------------------
    def state_dict(self) -> dict:
        """The evaluation counter, when nothing is pending, queued or unread."""
        with self._lock:
            self._check_idle("checkpointing")
            return {"step_counter": self._step_counter}

    def load_state_dict(self, state_dict: Mapping) -> None:
        with self._lock:
            self._check_idle("restoring a state")
            self._step_counter = int(state_dict.get("step_counter", 0))

    @staticmethod
    def extract_weights(policy: torch.nn.Module) -> TensorDictBase:
        """``policy``'s parameters and buffers, detached, cloned and on the CPU: safe to hand to
        another thread while training goes on."""
        return TensorDict.from_module(policy).data.detach().clone().cpu()

    # ---- lifetime ------------------------------------------------------------------------------
    def shutdown(self, timeout: float = 5.0) -> None:
        """Stop a running evaluation, drop the queued ones, join the thread, release the env and
        workers. Idempotent."""
        with self._lock:
            if self._closed:
                return
            self._closed = True
            self._requests.clear()
            self._lock.notify_all()
        self._run.interrupt()
        thread = self._thread
        if thread is not None and thread is not threading.current_thread():
            thread.join(timeout)
            if thread.is_alive():  # it shuts the run down itself when its evaluation returns
                warnings.warn(f"Evaluator.shutdown: the evaluation thread did not stop within {timeout} s; it "
                              "releases the env and workers when its evaluation returns", stacklevel=2)
                with self._lock:
                    self._running = False
                return
        with self._lock:
            self._running = False
        self._run.close()

    def __enter__(self) -> Evaluator:
        return self

    def __exit__(self, *exc) -> None:
        self.shutdown()

    # ---- internals -----------------------------------------------------------------------------
    def _evaluate(self, weights, step: int) -> dict:
        with self._run_lock:
            if self._closed:
                raise _Cancelled
            raw = self._run(weights)
        metrics = {f"{self.log_prefix}/{name}": raw[name] for name in _METRICS if name in raw}
        metrics[f"{self.log_prefix}/step"] = step
        metrics.update({f"{self.log_prefix}/{name}": value for name, value in raw.get("custom", {}).items()})
        if self.dump_video:
            self._run.dump_video(step)
        return metrics

    def _serve(self) -> None:
        """The background thread: runs the queued evaluations one after the other."""
        while True:
            with self._lock:
                while not self._requests and not self._closed:
                    self._lock.wait()
                if self._closed:
                    return
                weights, step = self._requests.popleft()
                self._running = True
            try:
                result = self._evaluate(weights, step)
            except _Cancelled:
                break
            except Exception as exc:  # handed to whoever polls: never lost in the thread
                result = exc
            if not isinstance(result, Exception):
                self._call_back(result)
            with self._lock:
                self._running = False
                if self._closed:
                    break
                self._results.append(result)
                self._lock.notify_all()
        if self._closed:
            self._run.close()  # shutdown() did not wait for this evaluation to stop

    def _take(self, timeout: float | None):
        with self._lock:
            if timeout is None or timeout > 0:
                self._lock.wait_for(lambda: self._results or not (self._running or self._requests), timeout)
            if not self._results:
                return None
            result = self._results.popleft()
        if isinstance(result, Exception):
            raise RuntimeError("Evaluator: the background evaluation failed (see the cause above)") from result
        return result

    def _call_back(self, metrics: dict) -> None:
        if self.on_result is None:
            return
        try:
            self.on_result(TensorDict({k: torch.as_tensor(v) for k, v in metrics.items()}, batch_size=[]))
        except Exception as exc:
            warnings.warn(f"Evaluator: on_result raised {exc!r}; the evaluation's metrics are returned as usual",
                          stacklevel=3)

    def _prepared(self, weights, weights_dict):
        """The weights to load, detached and on the CPU (safe across threads), or None."""
        if weights_dict:
            unknown = set(weights_dict) - {"policy"}
            if unknown:
                raise ValueError(f"Evaluator: weights_dict has {sorted(unknown)}; only the 'policy' weights are "
                                 "loaded into the eval policy")
            weights = weights_dict["policy"] if "policy" in weights_dict else weights
        if weights is None:
            return None
        if isinstance(weights, torch.nn.Module):
            return self.extract_weights(weights)
        if isinstance(weights, TensorDictBase):
            return weights.detach().clone().cpu()
        return WeightStrategy().extract_weights(weights).detach().clone().cpu()

    def _next_step(self, step: int | None) -> int:
        if step is not None:
            return step
        self._step_counter += 1
        return self._step_counter - 1

    def _check_open(self) -> None:
        if self._closed:
            raise RuntimeError("Evaluator: it was shut down; build a new one")

    def _check_idle(self, what: str) -> None:
        if self._running or self._requests or self._results:
            raise RuntimeError(f"Evaluator: {what} needs no pending, queued or unread evaluation; wait() for them")


def _checked_collector_kwargs(collector_kwargs: dict | None) -> dict:
    kwargs = dict(collector_kwargs or {})
    for name in kwargs:
        if name in _OWN_COLLECTOR_ARGS:
            own = _OWN_COLLECTOR_ARGS[name]
            fix = f"pass Evaluator({own}=...)" if own else "the Evaluator sets it"
            raise ValueError(f"Evaluator: collector_kwargs[{name!r}]: {fix}")
    return kwargs


class CollectorEvaluation:
    """Plays evaluations on a collector: a ``Collector`` in this process, or a one-worker
    ``MultiSyncCollector`` (``remote``). The env, the policy and the collector are made at the
    first evaluation."""

    def __init__(self, env, policy, policy_factory, *, remote: bool, num_trajectories: int, max_steps,
                 frames_per_batch, collector_cls, collector_kwargs: dict, weight_sync_schemes, device,
                 init_fn, exploration_type, reward_keys, metrics_fn):
        self.num_trajectories, self.max_steps = num_trajectories, max_steps
        self.remote = remote
        self.frames_per_batch = frames_per_batch
        self.collector_cls, self.collector_kwargs = collector_cls, collector_kwargs
        self.weight_sync_schemes, self.init_fn = weight_sync_schemes, init_fn
        self.exploration_type, self.reward_keys, self.metrics_fn = exploration_type, reward_keys, metrics_fn
        self.device = None if device is None else torch.device(device)
        self.env_factory = self.policy_factory = None
        self.env = self.policy = self.collector = None
        self.interruptor = Interruptor()
        self._cancelled = False
        if remote or (policy_factory is not None and callable(env) and not isinstance(env, EnvBase)):
            self.env_factory, self.policy_factory = env, policy_factory  # made where they run
            return
        self.env = freeze_vecnorm(env if isinstance(env, EnvBase) else env())
        self.policy = policy_factory(self.env) if policy_factory is not None else policy

    def __call__(self, weights) -> dict:
        if self.collector is None:
            self.collector = self._remote_collector() if self.remote else self._local_collector()
        if weights is not None:
            self._load(weights)
        self.collector.reset()  # every evaluation starts new episodes, with the weights just loaded
        trajectories = TrajectoryBatches(self.num_trajectories, "padded")
        start = time.perf_counter()
        with _eval_mode(self.policy), torch.no_grad():
            while True:
                batch = self.collector.next()
                if self._cancelled:
                    raise _Cancelled
                for ready in trajectories.regroup(batch):
                    return episode_metrics(ready, self.reward_keys, self.metrics_fn, time.perf_counter() - start)

    def _local_collector(self):
        from reap.collectors.collector import Collector

        if self.env is None:
            self.env = freeze_vecnorm(self.env_factory())
            self.policy = self.policy_factory(self.env)
            self.env_factory = self.policy_factory = None
        cls = self.collector_cls or Collector
        if isinstance(cls, str):
            import reap.collectors

            cls = getattr(reap.collectors, cls)
        extra = {"interruptor": self.interruptor} if isinstance(cls, type) and issubclass(cls, Collector) else {}
        max_steps = None if counts_steps(self.env) else self.max_steps  # its StepCounter keeps its own limit
        return cls(create_env_fn=self.env, policy=self.policy, total_frames=-1,
                   frames_per_batch=round_up(self.frames_per_batch or self.max_steps or 1000, self.env.numel),
                   max_frames_per_traj=max_steps, exploration_type=self.exploration_type,
                   **extra, **self.collector_kwargs)

    def _remote_collector(self):
        from reap.plugins import get_collector_backend

        make_env = FrozenEnvFactory(self.env_factory, self.init_fn, self.max_steps)
        return get_collector_backend("mp").factory(
            sync=True, create_env_fn=[make_env], policy_factory=functools.partial(_policy_for, make_env,
                                                                                   self.policy_factory),
            frames_per_batch=self.frames_per_batch or self.max_steps or 1000, total_frames=-1,
            exploration_type=self.exploration_type,
            weight_sync_schemes=self.weight_sync_schemes, **self.collector_kwargs)

    def _load(self, weights) -> None:
        if self.remote:
            self.collector.update_policy_weights_(weights)
            return
        if not isinstance(self.policy, torch.nn.Module):
            raise TypeError(f"Evaluator: weights were passed but the eval policy ({type(self.policy).__name__}) is "
                            "not an nn.Module to load them into")
        device = self.device or next((p.device for p in self.policy.parameters()), None)
        WeightStrategy().apply_weights(self.policy, weights if device is None else weights.to(device))

    def interrupt(self) -> None:
        self._cancelled = True
        self.interruptor.stop_collection()

    def dump_video(self, step: int) -> None:
        env = self.collector.env if self.collector is not None and not self.remote else None
        for transform in _transforms(env):
            dump = getattr(transform, "dump", None)
            if callable(dump):
                dump(step=step)

    def close(self) -> None:
        if self.collector is not None:
            self.collector.shutdown()
            self.collector = None


class _RayRun:
    """Plays evaluations in a ``RayEvalWorker`` actor (reap-collectors-ray)."""

    def __init__(self, env, policy_factory, *, num_trajectories, max_steps, reward_keys, metrics_fn,
                 exploration_type, init_fn, num_gpus, ray_kwargs):
        from reap.collectors.distributed import RayEvalWorker

        self.num_trajectories, self.max_steps = num_trajectories, max_steps
        self.worker = RayEvalWorker(init_fn, env, policy_factory, num_gpus=num_gpus, reward_keys=reward_keys,
                                    num_trajectories=num_trajectories, metrics_fn=metrics_fn,
                                    exploration_type=exploration_type, **ray_kwargs)

    def __call__(self, weights) -> dict:
        self.worker.submit(weights, self.max_steps)
        result = None
        while result is None:
            if self.worker.cancelled:
                raise _Cancelled
            result = self.worker.poll(timeout=0.1)
        return result

    def interrupt(self) -> None:
        self.worker.cancel()

    def dump_video(self, step: int) -> None:
        """The actor's env is not reachable from here: nothing to dump."""

    def close(self) -> None:
        self.worker.shutdown()


def episode_metrics(trajectories: TensorDictBase, reward_keys=("next", "reward"), metrics_fn=None,
                    seconds: float | None = None) -> dict:
    """The metrics of a padded ``[episodes, longest]`` batch (with ``("collector", "mask")``).

    ``reward``/``reward_std``: mean and standard deviation (0 for one episode) of the episodes'
    returns, each the last ``("next", "episode_reward")`` (``RewardSum``) or else the sum of
    ``reward_keys``; ``episode_length``: the mean of the last ``("next", "step_count")`` or else
    of the episodes' step counts; ``num_episodes``, ``frame_count``, ``fps`` (with ``seconds``),
    and ``custom``: what ``metrics_fn(trajectories)`` returns.

    Examples:
        >>> import torch
        >>> from tensordict import TensorDict
        >>> mask = torch.tensor([[True, True, True], [True, False, False]])
        >>> batch = TensorDict({("next", "reward"): torch.ones(2, 3, 1), ("collector", "mask"): mask},
        ...                    batch_size=[2, 3])
        >>> metrics = episode_metrics(batch)
        >>> metrics["reward"], metrics["episode_length"], metrics["num_episodes"]
        (2.0, 2.0, 2)
    """
    mask = trajectories.get(("collector", "mask"))
    episodes = mask.shape[0]
    lengths = mask.reshape(episodes, -1).sum(-1)
    last = (lengths - 1).clamp_min(0)
    rows = torch.arange(episodes)
    if EPISODE_REWARD_KEY in trajectories.keys(include_nested=True):
        returns = trajectories.get(EPISODE_REWARD_KEY)[rows, last].reshape(episodes, -1).sum(-1)
    elif reward_keys in trajectories.keys(include_nested=True):
        reward = trajectories.get(reward_keys)
        returns = (reward.reshape(*mask.shape, -1).sum(-1) * mask).sum(-1)
    else:
        raise KeyError(f"Evaluator: the episodes have neither {reward_keys!r} (reward_keys) nor "
                       f"{EPISODE_REWARD_KEY!r} (RewardSum); pass the env's reward entry as reward_keys=")
    if STEP_COUNT_KEY in trajectories.keys(include_nested=True):
        steps = trajectories.get(STEP_COUNT_KEY)[rows, last].reshape(episodes, -1)[:, 0]
    else:
        steps = lengths
    returns = returns.double()
    metrics = {
        "reward": returns.mean().item(),
        "reward_std": returns.std().item() if episodes > 1 else 0.0,
        "num_episodes": episodes,
        "episode_length": steps.double().mean().item(),
        "frame_count": int(lengths.sum()),
    }
    if seconds:
        metrics["fps"] = metrics["frame_count"] / seconds
    if metrics_fn is not None:
        metrics["custom"] = dict(metrics_fn(trajectories))
    return metrics


def freeze_vecnorm(env: EnvBase) -> EnvBase:
    """Freeze every ``VecNorm``/``VecNormV2`` of ``env``'s transforms (nested ``Compose`` and
    ``TransformedEnv`` too): they normalise with their statistics and stop updating them.
    Returns ``env``."""
    from reap.envs.transforms.normalization import VecNorm
    from reap.envs.transforms.vecnorm import VecNormV2

    for transform in _transforms(env):
        if isinstance(transform, (VecNorm, VecNormV2)):
            transform.freeze()
    return env


class FrozenEnvFactory:
    """A picklable env factory: runs ``init_fn`` (once per process), makes the env, freezes its
    VecNorms (:func:`freeze_vecnorm`) and, with ``max_steps``, cuts its episodes there with a
    ``StepCounter`` unless it counts its steps already (as ``Collector(max_frames_per_traj=)``)."""

    def __init__(self, make_env: Callable[[], EnvBase], init_fn: Callable[[], None] | None = None,
                 max_steps: int | None = None):
        self.make_env, self.init_fn, self.max_steps = make_env, init_fn, max_steps
        self._initialised = False

    def __call__(self, **kwargs) -> EnvBase:
        if self.init_fn is not None and not self._initialised:
            self.init_fn()
            self._initialised = True
        env = freeze_vecnorm(self.make_env(**kwargs))
        if self.max_steps is None or counts_steps(env):
            return env
        from reap.envs.transforms import StepCounter, TransformedEnv

        return TransformedEnv(env, StepCounter(max_steps=self.max_steps))


def _policy_for(make_env, policy_factory):
    """In the worker: the policy ``policy_factory`` makes for an env like the worker's."""
    env = make_env()
    try:
        return policy_factory(env)
    finally:
        env.close()


def _transforms(env):
    """The transforms of ``env``, outermost env first, ``Compose`` flattened."""
    from reap.envs.transforms.transformed_env import TransformedEnv, leaves_of

    while isinstance(env, TransformedEnv):
        yield from leaves_of(env.transform)
        env = env.base_env


@contextlib.contextmanager
def _eval_mode(policy):
    """``policy.eval()`` for the evaluation, its mode restored after."""
    if not isinstance(policy, torch.nn.Module):
        yield
        return
    was_training = policy.training
    policy.eval()
    try:
        yield
    finally:
        policy.train(was_training)
