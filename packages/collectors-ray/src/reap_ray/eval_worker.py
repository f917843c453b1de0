"""``RayEvalWorker``: evaluations played in a Ray actor (TorchRL's class).

The actor runs ``init_fn`` first (process-level set-up that must come before the env), makes the
env with ``env_maker`` and the policy with ``policy_maker(env)``, then plays each evaluation
as :class:`reap.collectors.Evaluator` does: ``num_trajectories`` whole episodes from a reset,
each cut at ``max_steps``, with the weights submitted. It is also the ``Evaluator``'s
``backend="ray"``.
"""

from __future__ import annotations

import weakref

import ray

from reap.collectors.arguments import START_TIMEOUT, checked_exploration_type
from reap.envs.utils import ExplorationType
from reap_ray._ray import check_placeable, ensure_ray, kill_actors, wait_ready


class EvalActor:
    """The actor's side: one :class:`~reap.collectors.evaluator.CollectorEvaluation` per
    ``(max_steps, exploration)`` asked for, each on an env of its own."""

    def __init__(self, init_fn, env_maker, policy_maker, options: dict):
        if init_fn is not None:
            init_fn()
        self.env_maker, self.policy_maker, self.options = env_maker, policy_maker, options
        self.runs: dict = {}
        self.run_for(options.pop("max_steps"), options.pop("exploration_type"))  # env and policy made now

    def ready(self):
        return ray.get_runtime_context().get_node_id()

    def run_for(self, max_steps, exploration_type):
        from reap.collectors.evaluator import CollectorEvaluation

        key = (max_steps, exploration_type)
        if key not in self.runs:
            self.runs[key] = CollectorEvaluation(self.env_maker(), None, self.policy_maker, remote=False,
                                                 max_steps=max_steps, exploration_type=exploration_type,
                                                 frames_per_batch=None, collector_cls=None, collector_kwargs={},
                                                 weight_sync_schemes=None, device=None, init_fn=None,
                                                 **self.options)
        return self.runs[key]

    def eval(self, weights, max_steps, exploration_type):
        return self.run_for(max_steps, exploration_type)(weights)

    def shutdown(self):
        for run in self.runs.values():
            run.close()
        self.runs.clear()


class RayEvalWorker:
    """Plays evaluations in a Ray actor: ``submit(weights, max_steps)``, then ``poll()``.

    Args:
        init_fn: called first in the actor's process (or None).
        env_maker: makes the eval env, in the actor.
        policy_maker: ``policy_maker(env)`` makes the policy, in the actor.

    Keyword Args:
        num_gpus (int): GPUs the actor asks for. Default: 1 (TorchRL's); 0 on a machine without.
        reward_keys: the reward entry (see :func:`~reap.collectors.evaluator.episode_metrics`).
        name (str, optional): a detached actor of that name, which :meth:`from_name` reaches
            from another process.
        num_trajectories (int): episodes per evaluation. Default: 10.
        metrics_fn: more metrics from each evaluation's episodes (see ``Evaluator``).
        ray_init_config (dict, optional): ``ray.init`` arguments, if Ray is not running yet.
        start_timeout (float): seconds to wait for the actor to be placed and built.
        **remote_kwargs: more ``ray.remote`` options (``num_cpus``, ``runtime_env``, ...).

    ``poll()`` returns a dict with ``"reward"`` (the mean return), ``"reward_std"``,
    ``"num_episodes"``, ``"episode_length"``, ``"frame_count"`` and ``"fps"``.

    Examples:
        >>> from reap.collectors.distributed import RayEvalWorker
        >>> from reap_testing import ConstantPolicyFactory, constant_policy, env_fn
        >>> worker = RayEvalWorker(None, env_fn(episode_len=4), ConstantPolicyFactory(), num_gpus=0,
        ...                        num_trajectories=2)
        >>> worker.submit(constant_policy(2.0), max_steps=10)
        >>> result = worker.poll(timeout=60)
        >>> result["reward"], result["episode_length"], result["num_episodes"]
        (8.0, 4.0, 2)
        >>> worker.shutdown()
    """

    def __init__(self, init_fn, env_maker, policy_maker, *, num_gpus: int = 1, reward_keys=("next", "reward"),
                 name: str | None = None, num_trajectories: int = 10, metrics_fn=None,
                 exploration_type=ExplorationType.DETERMINISTIC, ray_init_config: dict | None = None,
                 start_timeout: float = START_TIMEOUT, **remote_kwargs):
        ensure_ray(ray_init_config)
        config = {"num_cpus": 1, **remote_kwargs, "num_gpus": num_gpus}
        check_placeable([config], "RayEvalWorker")
        self.exploration_type = checked_exploration_type(exploration_type, "RayEvalWorker")
        options = {"num_trajectories": num_trajectories, "reward_keys": reward_keys, "metrics_fn": metrics_fn,
                   "max_steps": None, "exploration_type": self.exploration_type}
        if name is not None:
            config.update(name=name, lifetime="detached")
        self._actor = ray.remote(EvalActor).options(max_restarts=0, **config).remote(
            init_fn, env_maker, policy_maker, options)
        self._pending = None
        self.cancelled = False
        self._finalizer = weakref.finalize(self, kill_actors, [self._actor], 2.0)
        try:
            wait_ready([self._actor.ready.remote()], [config], start_timeout, "RayEvalWorker")
        except BaseException:
            self.shutdown()
            raise

    @classmethod
    def from_name(cls, name: str, *, reward_keys=("next", "reward")) -> RayEvalWorker:
        """The worker whose actor another process started with ``name=``."""
        worker = object.__new__(cls)
        worker._actor, worker._pending, worker.cancelled = ray.get_actor(name), None, False
        worker.exploration_type = ExplorationType.DETERMINISTIC
        worker._finalizer = None  # not this process's actor to kill when the handle goes
        return worker

    def submit(self, weights, max_steps: int | None = None, *, deterministic: bool | None = None,
               break_when_any_done: bool = True) -> None:
        """Start an evaluation with ``weights`` (None: the actor's policy as it is); a result not
        polled yet is dropped. ``deterministic`` True or False overrides ``exploration_type``
        (deterministic or random actions). Episodes are always played whole:
        ``break_when_any_done=False`` (TorchRL's fixed-length rollout) is refused."""
        if not break_when_any_done:
            raise ValueError("RayEvalWorker.submit: episodes are played whole (num_trajectories of them); "
                             "leave break_when_any_done=True")
        exploration = self.exploration_type if deterministic is None else (
            ExplorationType.DETERMINISTIC if deterministic else ExplorationType.RANDOM)
        if weights is not None:
            from reap.weight_update import WeightStrategy

            weights = WeightStrategy().extract_weights(weights).detach().clone().cpu()
        self._pending = self._actor.eval.remote(weights, max_steps, exploration)

    def poll(self, timeout: float | None = 0):
        """The result of the last submitted evaluation, waiting up to ``timeout`` seconds (None:
        until it is in); None if it is not in yet or nothing was submitted."""
        if self._pending is None:
            return None
        ready, _ = ray.wait([self._pending], timeout=timeout)
        if not ready:
            return None
        ref, self._pending = self._pending, None
        return ray.get(ref)

    def cancel(self) -> None:
        """Stop waiting for the evaluation in flight (``cancelled`` is then True)."""
        self.cancelled = True

    def shutdown(self) -> None:
        """Close the actor's envs and kill it. Idempotent."""
        actor, self._actor, self._pending = self._actor, None, None
        if actor is None or not ray.is_initialized():
            return
        try:
            ray.get(actor.shutdown.remote(), timeout=10)
        except Exception:  # dead already, or stuck: killed below either way
            pass
        kill_actors([actor])
        if self._finalizer is not None:
            self._finalizer.detach()
