"""``Collector``: single-process collection with TorchRL's signature, at the raw loop's speed.

The batch of every iteration lives in time-major arrays allocated once; each step the policy
reads tensor views of them and the env writes into them in place (see ``reap.envs.base``). A
batch is assembled with one copy per key when the rollout ends.

``total_frames`` need not be a multiple of ``frames_per_batch``: collection stops after
``ceil(total_frames / frames_per_batch)`` batches, so the frames yielded are ``total_frames``
rounded up to a whole batch. ``frames_per_batch`` is likewise rounded up to a multiple of the
number of envs (with a warning), as is ``init_random_frames`` to a whole number of batches.

Examples:
    >>> import torch
    >>> from tensordict.nn import TensorDictModule
    >>> from reap import Collector, GymEnv
    >>> policy = TensorDictModule(torch.nn.Linear(3, 1), in_keys=["observation"], out_keys=["action"])
    >>> with Collector(GymEnv("Pendulum-v1", num_envs=2), policy, frames_per_batch=8,
    ...                total_frames=16) as collector:
    ...     shapes = [batch["next", "reward"].shape for batch in collector]
    >>> shapes
    [torch.Size([2, 4, 1]), torch.Size([2, 4, 1])]
"""

from __future__ import annotations

import warnings
from collections.abc import Callable, Sequence

import numpy as np
import torch
from tensordict import TensorDict, TensorDictBase
from tensordict.nn import InteractionType

from reap.collectors.arguments import (
    check_collector_kwargs,
    check_int,
    check_torchrl_kwargs,
    checked_device,
    checked_exploration_type,
    checked_init_random_frames,
    checked_track_policy_version,
    pop_no_weight_sync,
    round_up,
)
from reap.collectors.base import BaseCollector, checked_hook, is_private_key
from reap.collectors.interaction import rollout_interaction
from reap.collectors.interruptor import checked_interruptor
from reap.collectors.policy import (
    PolicyRunner,
    action_leaf_spec,
    check_action,
    check_cast_actions,
    needs_cast,
)
from reap.collectors.policy_transforms import with_policy_transforms
from reap.collectors.stepwise import StepwiseRollout, stepwise_reason
from reap.collectors.traj_batches import checked_traj_options
from reap.collectors.trajectories import (
    TrajIdCounter,
    extend_by_steps,
    mark_time,
    mark_truncated,
    split_trajectories,
    tag_policy_version,
)
from reap.envs.base import EnvBase, checked_env, is_hidden, refuse_torchrl_env
from reap.envs.serial import SerialEnv
from reap.plugins import get_collector_backend, hook
from reap.weight_update import VanillaWeightUpdater, WeightUpdaterBase, weights_from_update_args

LOCAL_BACKENDS = (None, "local", "direct")
BACKEND_ALIASES = {"process": "mp"}


def checked_num_collectors(num_collectors, backend, sync, backend_options) -> int | None:
    """``Collector``'s backend selectors as TorchRL checks them: ``num_collectors`` is None or a
    positive int; a collector that stays in this process (``backend="local"``/``"direct"``) takes
    no ``sync``, no ``backend_options`` and at most one collector.

    Examples:
        >>> checked_num_collectors(None, "local", None, None) is None
        True
        >>> checked_num_collectors(2, "local", None, None)
        Traceback (most recent call last):
        ...
        ValueError: Collector: backend='local' runs one collector in this process, num_collectors=2 needs backend='mp' (or no backend)
    """
    if num_collectors is not None and (isinstance(num_collectors, bool) or not isinstance(num_collectors, int)):
        raise TypeError(f"Collector: num_collectors must be a positive int, got {num_collectors!r}")
    check_int(num_collectors, "num_collectors", "Collector")
    local = backend in LOCAL_BACKENDS and (backend is not None or num_collectors is None)
    if local:
        name = backend or "local"
        if num_collectors not in (None, 1):
            raise ValueError(f"Collector: backend={name!r} runs one collector in this process, "
                             f"num_collectors={num_collectors} needs backend='mp' (or no backend)")
        if sync is not None:
            raise ValueError(f"Collector: sync is for collectors of several workers (backend='mp', 'ray', ...); "
                             f"backend={name!r} runs one in this process: leave sync out")
        if backend_options:
            raise ValueError(f"Collector: backend_options are for the other backends; backend={name!r} takes "
                             "its arguments directly")
    elif sync is not None and not isinstance(sync, bool):
        raise TypeError(f"Collector: sync must be True, False or None, got {sync!r}")
    return num_collectors


def replicated_env_fns(create_env_fn, num_collectors: int) -> list:
    """One env constructor per collector: a list must have ``num_collectors`` of them, a single
    one is used for each (TorchRL's ``Collector(..., num_collectors=n)``).

    Examples:
        >>> replicated_env_fns(len, 3)
        [<built-in function len>, <built-in function len>, <built-in function len>]
    """
    if isinstance(create_env_fn, Sequence) and not isinstance(create_env_fn, str):
        if len(create_env_fn) != num_collectors:
            raise ValueError(f"Collector: num_collectors={num_collectors} but create_env_fn has "
                             f"{len(create_env_fn)} constructors; give one, or one per collector")
        return list(create_env_fn)
    return [create_env_fn] * num_collectors


def make_env(create_env_fn, create_env_kwargs=None) -> EnvBase:
    """An env from an ``EnvBase``, a callable returning one, or a list of callables."""
    if isinstance(create_env_fn, EnvBase):
        return create_env_fn
    if isinstance(create_env_fn, Sequence) and not isinstance(create_env_fn, str):
        if len(create_env_fn) == 1:
            return make_env(create_env_fn[0], create_env_kwargs)
        return SerialEnv(len(create_env_fn), list(create_env_fn), create_env_kwargs=create_env_kwargs)
    if callable(create_env_fn):
        refuse_torchrl_env(create_env_fn, "Collector")
        return checked_env(create_env_fn(**(create_env_kwargs or {})), "Collector")
    raise TypeError(
        f"create_env_fn must be an EnvBase, a callable returning one or a list of callables, "
        f"got {type(create_env_fn).__name__}"
    )


class Collector(BaseCollector):
    """Collect batches of ``frames_per_batch`` frames from one env (batched or not).

    Arguments follow TorchRL's ``Collector``. ``backend`` other than ``"local"`` hands the
    arguments to the registered backend (``"mp"`` or TorchRL's ``"process"``, ``"ray"``, ...),
    which returns its own collector: ``num_collectors`` of them (a single ``create_env_fn`` is
    used for each; ``num_collectors`` alone picks ``"mp"``), ``sync`` (default False, as
    TorchRL's) chooses sync or async collection, and ``backend_options`` are more keyword
    arguments for the backend's collector. ``trajs_per_batch=N`` yields batches of ``N``
    complete trajectories instead (``traj_format``, ``trajs_per_write``: see
    :mod:`reap.collectors.traj_batches`). ``compact_obs=True`` leaves the ``("next", ...)``
    observations and states out of batches (each is the next step's root: TorchRL's). An ``interruptor`` (:class:`~reap.collectors.Interruptor`,
    or TorchRL's) is polled after each step: once stopped, the rollout ends and the steps not
    collected get ``("collector", "traj_ids") == -1``.

    Examples:
        >>> from reap import Collector, GymEnv
        >>> with Collector(GymEnv("CartPole-v1"), None, frames_per_batch=8, total_frames=8) as c:
        ...     print(type(c).__name__, next(iter(c)).batch_size)
        Collector torch.Size([8])
    """

    def __new__(cls, create_env_fn=None, policy=None, *args, backend=None, num_collectors=None, sync=None,
                backend_options=None, **kwargs):
        backend = BACKEND_ALIASES.get(backend, backend)
        num_collectors = checked_num_collectors(num_collectors, backend, sync, backend_options)
        if backend is None and num_collectors is not None:
            backend = "mp"  # TorchRL: num_collectors asks for collectors in processes
        if backend in LOCAL_BACKENDS:
            return super().__new__(cls)
        if not isinstance(backend, str):
            raise TypeError(f"backend must be a backend name (e.g. 'mp', 'ray'), got {backend!r}")
        entry = get_collector_backend(backend)
        options = dict(backend_options or {})
        twice = sorted(options.keys() & {*kwargs, "create_env_fn", "policy", "backend", "num_collectors", "sync"})
        if twice:
            raise ValueError(f"Collector: backend_options repeats {twice}; pass each argument once")
        if num_collectors is not None:
            create_env_fn = replicated_env_fns(create_env_fn, num_collectors)
        return entry.factory(create_env_fn=create_env_fn, policy=policy, sync=bool(sync), **options, **kwargs)

    def __init__(
        self,
        create_env_fn=None,
        policy=None,
        *,
        policy_factory: Callable | None = None,
        backend: str | None = None,
        num_collectors: int | None = None,
        sync: bool | None = None,
        backend_options: dict | None = None,
        frames_per_batch: int,
        total_frames: int = -1,
        device=None,
        storing_device=None,
        policy_device=None,
        env_device=None,
        create_env_kwargs: dict | None = None,
        max_frames_per_traj: int | None = None,
        init_random_frames: int | None = None,
        reset_at_each_iter: bool = False,
        postproc: Callable | None = None,
        split_trajs: bool | None = None,
        exploration_type=InteractionType.RANDOM,
        return_same_td: bool = False,
        replay_buffer=None,
        extend_buffer: bool = True,
        track_traj_ids: bool = True,
        weight_updater: WeightUpdaterBase | Callable | None = None,
        worker_idx: int | None = None,
        traj_id_counter: TrajIdCounter | None = None,
        set_truncated: bool = False,
        pre_collect_hook: Callable[[], None] | None = None,
        post_collect_hook: Callable[[TensorDictBase], None] | None = None,
        track_policy_version: bool = False,
        trajs_per_batch: int | None = None,
        trajs_per_write: int | None = None,
        traj_format: str | None = None,
        auto_register_policy_transforms: bool | None = None,
        interruptor=None,
        compact_obs: bool = False,
        **torchrl_kwargs,
    ):
        self._synchronises = not pop_no_weight_sync(torchrl_kwargs)
        check_torchrl_kwargs(torchrl_kwargs, "Collector")
        check_collector_kwargs(dict(
            frames_per_batch=frames_per_batch, total_frames=total_frames, policy=policy,
            policy_factory=policy_factory, max_frames_per_traj=max_frames_per_traj,
            init_random_frames=init_random_frames, postproc=postproc, replay_buffer=replay_buffer,
            exploration_type=exploration_type, device=device, storing_device=storing_device,
            policy_device=policy_device, env_device=env_device), "Collector")
        self._trajs = checked_traj_options(  # trajs_per_batch: see reap.collectors.traj_batches
            trajs_per_batch, trajs_per_write, traj_format, "Collector", replay_buffer=replay_buffer,
            split_trajs=split_trajs, track_traj_ids=track_traj_ids, reset_at_each_iter=reset_at_each_iter)
        if create_env_fn is None:
            raise ValueError("Collector: create_env_fn is required (an env, or a callable returning one)")
        self.exploration_type = checked_exploration_type(exploration_type, "Collector")
        self.policy_device = checked_device("policy_device", policy_device or device, "Collector")
        self.env_device = checked_device("env_device", env_device, "Collector")  # None or the CPU
        if storing_device is None and device is None and self.env_device == self.policy_device:
            storing_device = self.env_device  # TorchRL's fallback: the device env and policy share
        self.storing_device = checked_device("storing_device", storing_device or device, "Collector")
        init_random_frames = checked_init_random_frames(init_random_frames, "Collector")

        self.env = make_env(create_env_fn, create_env_kwargs)
        if max_frames_per_traj is not None:
            self.env = _with_step_counter(self.env, max_frames_per_traj)
        self.n_envs = self.env.numel
        self.worker_idx = -1 if worker_idx is None else worker_idx
        requested = frames_per_batch
        self.frames_per_batch = round_up(frames_per_batch, self.n_envs)
        self._steps = self.frames_per_batch // self.n_envs
        if self.frames_per_batch != requested:
            warnings.warn(
                f"Collector: frames_per_batch={requested} is not a multiple of the env's "
                f"{self.n_envs} envs; each batch will hold {self.frames_per_batch} frames",
                UserWarning,
                stacklevel=2,
            )
        self.total_frames = total_frames
        self._target_frames = (
            -1 if total_frames == -1
            else round_up(total_frames, self.frames_per_batch)
        )
        self.init_random_frames = 0
        if init_random_frames:
            rounded = round_up(init_random_frames, self.frames_per_batch)
            if rounded != init_random_frames:
                warnings.warn(
                    f"Collector: init_random_frames={init_random_frames} is not a multiple of "
                    f"frames_per_batch={self.frames_per_batch}; random actions are used for the first "
                    f"{rounded} frames (whole batches)",
                    UserWarning,
                    stacklevel=2,
                )
            self.init_random_frames = rounded
        self.max_frames_per_traj = max_frames_per_traj
        self.requested_frames_per_batch = requested
        self.reset_at_each_iter = reset_at_each_iter
        self.postproc = postproc
        self.split_trajs = bool(split_trajs)
        self.set_truncated = bool(set_truncated)
        self._pre_collect_hook = checked_hook(pre_collect_hook, "pre_collect_hook")
        self._post_collect_hook = checked_hook(post_collect_hook, "post_collect_hook")
        self.track_policy_version = checked_track_policy_version(track_policy_version, "Collector")
        self.return_same_td = return_same_td
        self.replay_buffer = replay_buffer
        self.extend_buffer = extend_buffer
        self.track_traj_ids = track_traj_ids
        self.interruptor = checked_interruptor(interruptor, "Collector")
        self.compact_obs = bool(compact_obs)
        self._traj_counter = traj_id_counter or TrajIdCounter()
        self._generator = torch.Generator()
        self._generator.seed()

        self.policy = policy_factory() if policy_factory is not None else policy
        if self.policy_device is not None and isinstance(self.policy, torch.nn.Module):
            self.policy = self.policy.to(self.policy_device)
        self._source_policy = policy
        self.env = with_policy_transforms(self.env, self.policy, auto_register_policy_transforms, "Collector")
        #: why the env is driven one TensorDict per step (``path == "tensordict"``), else None
        self.path_reason = stepwise_reason(self.env)
        self._stepwise: StepwiseRollout | None = None
        if self.path_reason is None:
            self._runner = PolicyRunner(self.policy, self.env, policy_device=self.policy_device,
                                        generator=self._generator)
            self._allocate()
        else:
            self._runner = None
            self._stepwise = StepwiseRollout(
                self.env, self.policy, steps=self._steps, traj_counter=self._traj_counter,
                generator=self._generator, policy_device=self.policy_device, track_traj_ids=track_traj_ids,
                compact_obs=self.compact_obs)
        if weight_updater is None:
            weight_updater = VanillaWeightUpdater()
        elif isinstance(weight_updater, type) or (
            callable(weight_updater) and not isinstance(weight_updater, WeightUpdaterBase)
        ):
            weight_updater = weight_updater()
        if not isinstance(weight_updater, WeightUpdaterBase):
            raise TypeError(f"Collector: weight_updater must be a WeightUpdaterBase, got {weight_updater!r}")
        self.weight_updater = weight_updater
        self.weight_updater.register_collector(self)
        self.policy_version = 0  # update_policy_weights_ calls so far, as the multi-worker collectors count
        self._frames = 0
        self._iter = 0
        self._started = False
        self._closed = False

    # ---- buffers ---------------------------------------------------------------------------
    def _allocate(self) -> None:
        env, steps = self.env, self._steps
        root, nxt, root_td, next_td = env.allocate(steps)
        self._root, self._next = root, nxt
        self._root_torch = dict(root_td.items())
        self._next_torch = dict(next_td.items())
        env._reset_into(root, 0, None)
        probe_in = TensorDict({k: self._root_torch[k][0] for k in env.state_keys}, batch_size=env.batch_size)
        with torch.no_grad(), rollout_interaction(self.exploration_type):
            outputs = self._runner.probe(probe_in)
        check_action(outputs[env.action_key], env)
        self._policy_keys = [k for k in outputs if k != env.action_key]
        targets = dict(root)  # where the runner writes each output: a root array, or a next one
        for key in self._policy_keys:
            value = outputs[key]
            if not isinstance(value, torch.Tensor) or tuple(value.shape[: len(env.batch_size)]) != tuple(env.batch_size):
                raise ValueError(
                    f"policy output {key!r} must be a tensor with the env's batch dims "
                    f"{tuple(env.batch_size)}, got {getattr(value, 'shape', type(value).__name__)}"
                )
            if isinstance(key, tuple) and len(key) == 2 and key[0] == "next" and key[1] in nxt:
                targets[key] = nxt[key[1]]  # e.g. a recurrent state: carried to the next root
                continue
            buf = torch.zeros((steps + 1, *value.shape), dtype=value.dtype)
            self._root_torch[key] = buf
            root[key] = targets[key] = buf.numpy()
        action_shape = tuple(outputs[env.action_key].shape)
        if action_shape != tuple(action_leaf_spec(env).shape):  # e.g. () for a spec of shape (1,): a view laid out as it
            view = root[env.action_key].view()
            view.shape = (steps + 1, *action_shape)  # raises rather than copy: the env must see each write
            targets[env.action_key] = view
        self._cast_actions = None  # (the policy's actions, the env's), each step's cast checked exact
        action_dtype = outputs[env.action_key].dtype
        if needs_cast(action_dtype, action_leaf_spec(env)):
            policy_actions = torch.zeros((steps + 1, *action_shape), dtype=action_dtype).numpy()
            self._cast_actions = (policy_actions, targets[env.action_key])
            targets[env.action_key] = policy_actions
        self._runner.bind(targets, self._root_torch, [env.action_key, *self._policy_keys])
        batch = env.batch_size
        self._carry = [(root[k], nxt[k]) for k in env.state_keys]
        written = {k[1] for k in self._policy_keys if isinstance(k, tuple) and k[0] == "next"}
        # entries whose "next" value is the root's unless the policy writes it (TensorDictPrimer)
        self._passthrough = [(nxt[k], root[k]) for k in env.passthrough_keys if k not in written]
        self._carried_keys = [k for k in env.state_keys]
        self._done_flat = nxt["done"].reshape(steps, -1)
        self._traj = np.zeros((steps, *batch), dtype=np.int64)
        self._cur_traj = np.zeros(batch, dtype=np.int64)
        self._new_trajectories(None)
        nb = len(batch)
        dropped = set(env._compact_next_keys()) if self.compact_obs else set()
        self._all_out_sources = [
            (k, v[:steps].movedim(0, nb)) for k, v in self._root_torch.items() if not is_hidden(k)
        ] + [(("next", k), v.movedim(0, nb)) for k, v in self._next_torch.items()
             if not is_hidden(k) and ("next", k) not in dropped]
        if self.track_traj_ids:
            self._all_out_sources.append((("collector", "traj_ids"), torch.from_numpy(self._traj).movedim(0, nb)))
        self._out_sources = [(k, v) for k, v in self._all_out_sources if not is_private_key(k)]
        # the batch keeps the policy's action dtype (TorchRL's), e.g. an int64 one-hot for a bool spec
        self._out_dtypes = {} if action_dtype == self._root_torch[env.action_key].dtype else {env.action_key: action_dtype}
        self._out_batch_size = (*batch, steps)
        self._same_td: TensorDict | None = None

    def _new_trajectories(self, mask: np.ndarray | None) -> None:
        count = self.n_envs if mask is None else int(mask.sum())
        first = self._traj_counter.take(count)
        ids = np.arange(first, first + count)
        if mask is None:
            self._cur_traj[...] = ids.reshape(self._cur_traj.shape)
        else:
            self._cur_traj[mask] = ids

    # ---- the hot loop ----------------------------------------------------------------------
    def _rollout(self) -> None:
        if self._stepwise is not None:
            if self.reset_at_each_iter and self._started_batches:
                self._stepwise.reset()
            self._stepwise_steps = self._stepwise.rollout(random=self._frames < self.init_random_frames,
                                                          interruptor=self.interruptor)
            return
        env, root, nxt = self.env, self._root, self._next
        steps = self._steps
        if self.reset_at_each_iter and self._started_batches:
            env._reset_into(root, 0, None)
            self._new_trajectories(None)
        elif self._started_batches:
            last = self._rows  # the root after the last step (the last batch may have been interrupted)
            for key in self._carried_keys:
                root[key][0] = root[key][last]
        step_into, action = env._step_into, root[env.action_key]
        act = self._runner.random_action if self._frames < self.init_random_frames else self._runner
        if self._cast_actions is not None:
            act = _casting(act, *self._cast_actions, action_leaf_spec(env))
        carry, done_flat, traj, cur = self._carry, self._done_flat, self._traj, self._cur_traj
        passthrough = self._passthrough
        single = self.n_envs == 1
        interruptor = self.interruptor
        self._rows = steps
        for t in range(steps):
            for dest, src in passthrough:
                dest[t] = src[t]
            act(t)
            step_into(action[t], t, root, nxt)
            traj[t] = cur
            for dest, src in carry:
                dest[t + 1] = src[t]
            if done_flat[t, 0] if single else done_flat[t].any():
                self._reset_done(t)
            if interruptor is not None and interruptor.collection_stopped():
                self._rows = t + 1
                traj[t + 1:] = -1  # steps not collected (their other entries are stale)
                break

    def _reset_done(self, t: int) -> None:
        mask = self._done_flat[t].reshape(self.env.batch_size)
        if self.n_envs == 1:
            self.env._reset_into(self._root, t + 1, None)
            self._new_trajectories(None)
        else:
            mask = mask.copy()
            self.env._reset_into(self._root, t + 1, mask)
            self._new_trajectories(mask)

    # ---- iteration -------------------------------------------------------------------------
    _started_batches = 0
    _rows = 0  # the steps of the last rollout (fewer than a batch's when it was interrupted)
    _same_td: TensorDict | None = None

    @property
    def _exclude_private_keys(self) -> bool:
        """TorchRL's switch (True by default): entries with a part starting with ``"_"`` (e.g. an
        exploration module's ``"_ou_prev_noise"``) stay out of the batches. Set it before the
        first batch."""
        return self.__dict__.get("_private_keys_excluded", True)

    @_exclude_private_keys.setter
    def _exclude_private_keys(self, value: bool) -> None:
        self.__dict__["_private_keys_excluded"] = value = bool(value)
        if self._stepwise is not None:
            self._stepwise.exclude_private_keys = value
            self._stepwise._template = self._stepwise._make_template()
        else:
            self._out_sources = [(k, v) for k, v in self._all_out_sources if not (value and is_private_key(k))]
        self._same_td = None

    @property
    def _use_buffers(self) -> bool:
        """TorchRL's flag: whether steps are written into buffers allocated once (the array path)."""
        return self._stepwise is None

    @property
    def path(self) -> str:
        """``"arrays"``: the env steps into preallocated arrays (envs of TorchRL's plain layout);
        ``"tensordict"``: one TensorDict per step, as TorchRL's collectors run (several action keys,
        nested or heterogeneous entries; slower; ``path_reason`` says why)."""
        return "arrays" if self._stepwise is None else "tensordict"

    @property
    def fixed_layout(self) -> bool:
        """Whether every batch has the layout of :meth:`empty_batch` (False for envs with
        variable-shape entries, whose batches are lazy stacks)."""
        return self._stepwise is None or not self._stepwise.dynamic

    def empty_batch(self) -> TensorDict:
        """A zeroed TensorDict with the layout of one batch (e.g. to place in shared memory)."""
        if self._stepwise is not None:
            return self._stepwise.empty_batch()
        batch = TensorDict(batch_size=self._out_batch_size)
        for key, src in self._out_sources:
            batch.set(key, torch.zeros(src.shape, dtype=self._out_dtypes.get(key, src.dtype)))
        return batch

    def _assemble(self, dest: TensorDictBase | None = None) -> TensorDictBase:
        if dest is None and self.return_same_td:
            dest = self._same_td = self._same_td if self._same_td is not None else self.empty_batch()
        if self._stepwise is not None:
            steps, self._stepwise_steps = self._stepwise_steps, None
            return self._stepwise.batch(steps, dest)
        if dest is not None:
            for key, src in self._out_sources:
                dest.get(key).copy_(src)
            return dest
        batch = TensorDict(batch_size=self._out_batch_size)
        for key, src in self._out_sources:
            batch.set(key, src.clone(memory_format=torch.contiguous_format) if key not in self._out_dtypes
                      else src.to(self._out_dtypes[key], memory_format=torch.contiguous_format))
        return batch

    def collect_into(self, dest: TensorDictBase) -> TensorDictBase:
        """Collect one raw batch into ``dest`` (laid out as ``empty_batch()``), in place.

        This is what multi-process workers run: the same loop, then one copy into shared memory.
        No ``split_trajs``/``postproc``/``replay_buffer``: the receiving side applies those; the
        ``post_collect_hook`` sees ``dest``.
        """
        batch = self._collect(dest)
        if self._post_collect_hook is not None:
            self._post_collect_hook(batch)
        return batch

    def _collect(self, dest: TensorDictBase | None = None) -> TensorDictBase:
        self._check_open()
        if self._pre_collect_hook is not None:
            self._pre_collect_hook()
        hook().reap_rollout_start(collector=self, worker_idx=self.worker_idx)
        with torch.no_grad(), rollout_interaction(self.exploration_type):
            self._rollout()
        self._started_batches += 1
        hook().reap_rollout_end(collector=self, worker_idx=self.worker_idx, frames=self.frames_per_batch)
        batch = self._assemble(dest)
        if self.set_truncated:
            mark_truncated(batch)
        self._frames += self.frames_per_batch
        self._iter += 1
        return batch

    def iterator(self):
        self._check_open()
        if not self._started:
            self._started = True
            hook().reap_collector_start(collector=self, worker_idx=self.worker_idx)
        while self._target_frames == -1 or self._frames < self._target_frames:
            batch = self.rollout()  # checks the collector is still open
            if self._post_collect_hook is not None:
                self._post_collect_hook(batch)
            if self._trajs is not None:  # trajs_per_batch: whole trajectories
                yield from self._trajs.regroup(batch, self.replay_buffer)
            elif self.replay_buffer is not None:
                if self.extend_buffer:
                    self.replay_buffer.extend(batch)
                else:
                    extend_by_steps(self.replay_buffer, batch)
                yield None
            else:
                yield batch

    def _worker_batch(self) -> TensorDictBase:
        """One batch for a multi-worker collector's worker: the iterator's batch without the
        ``reap_batch_ready`` hook, which the driver fires once per batch it yields."""
        if not self._started:
            self._started = True
            hook().reap_collector_start(collector=self, worker_idx=self.worker_idx)
        batch = self._postprocess(self._collect())
        if self._post_collect_hook is not None:
            self._post_collect_hook(batch)
        return batch

    def rollout(self) -> TensorDictBase:
        """Collect one batch (no post-processing loop bookkeeping beyond frame counts)."""
        batch = self._collect()
        if self.track_policy_version:
            tag_policy_version(batch, self.policy_version)
        batch = self._postprocess(batch)
        hook().reap_batch_ready(collector=self, batch=batch)
        return batch

    def fake_tensordict(self) -> TensorDictBase:
        """A zeroed batch laid out as the ones the collector yields, without stepping (TorchRL's):
        ``empty_batch()`` through ``set_truncated``, ``storing_device``, ``split_trajs`` and
        ``postproc``, e.g. to size a replay buffer's storage.

        Examples:
            >>> from reap import Collector, GymEnv
            >>> collector = Collector(GymEnv("CartPole-v1"), None, frames_per_batch=8)
            >>> fake = collector.fake_tensordict()
            >>> fake.batch_size, fake["next", "observation"].shape
            (torch.Size([8]), torch.Size([8, 4]))
        """
        batch = self.empty_batch()
        if self.set_truncated:
            mark_truncated(batch)
        return self._postprocess(batch)

    def _postprocess(self, batch: TensorDictBase) -> TensorDictBase:
        if self.storing_device is not None and batch.device != self.storing_device:  # cpu too, as TorchRL
            batch = batch.to(self.storing_device)
        mark_time(batch)
        if self.split_trajs:
            batch = mark_time(split_trajectories(batch))
        if self.postproc is not None:
            batch = self.postproc(batch)
        return batch

    # ---- control ---------------------------------------------------------------------------
    def reset(self, index=None) -> None:
        """Reset every env (or those at ``index``) before the next step."""
        self._check_open()
        if self._trajs is not None:  # trajs_per_batch: the episodes reset here never end
            self._drop_reset_trajectories(index)
        if self._stepwise is not None:
            self._stepwise.reset(index)
            return
        steps = self._steps
        if index is None:
            self.env._reset_into(self._root, steps if self._started_batches else 0, None)
            self._new_trajectories(None)
            return
        mask = np.zeros(self.env.batch_size, dtype=bool)
        mask[index] = True
        self.env._reset_into(self._root, steps if self._started_batches else 0, mask)
        self._new_trajectories(mask)

    def _drop_reset_trajectories(self, index) -> None:
        if index is None:
            self._trajs.flush()
            return
        running = (self._cur_traj if self._stepwise is None
                   else self._stepwise.carrier.get(("collector", "traj_ids")).numpy())
        mask = np.zeros(running.shape, dtype=bool)
        mask[index] = True
        self._trajs.drop(running[mask])

    def set_seed(self, seed: int, static_seed: bool = False) -> int:
        """Seed the env and the random-action generator; the envs restart from a reset."""
        self._check_open()
        if not isinstance(seed, int):
            raise TypeError(f"set_seed: seed must be an int, got {seed!r}")
        out = self.env.set_seed(seed, static_seed=static_seed)
        self._generator.manual_seed(seed)
        self.reset()
        return out

    def update_policy_weights_(self, policy_or_weights=None, *, worker_ids=None, model_id=None,
                               weights_dict=None, **kwargs) -> None:
        """Copy new weights into the collector's policy.

        Accepts a module, a TensorDict, a state dict, ``weights_dict={"policy": ...}`` or the
        keywords ``policy=``/``weights=``. With no argument, the policy the collector was given
        is the source (a no-op when the collector runs that very object).
        """
        self._check_open()
        if not self._synchronises:  # weight_sync_schemes={"policy": NoWeightSyncScheme()}
            return
        policy_or_weights = weights_from_update_args(
            policy_or_weights, model_id=model_id, weights_dict=weights_dict, **kwargs
        )
        if policy_or_weights is None and self._source_policy is not None and self._source_policy is not self.policy:
            policy_or_weights = self._source_policy
        self.weight_updater.push_weights(policy_or_weights, worker_ids=worker_ids)
        self.policy_version += 1

    def state_dict(self) -> dict:
        """Policy weights, env (transform) statistics and progress: tensors and ints only."""
        self._check_open()
        state = {"frames": self._frames, "iter": self._iter, "env_state_dict": self.env.state_dict()}
        if isinstance(self.policy, torch.nn.Module):
            state["policy_state_dict"] = self.policy.state_dict()
        return state

    def load_state_dict(self, state_dict: dict) -> None:
        self._check_open()
        if "policy_state_dict" in state_dict:
            if not isinstance(self.policy, torch.nn.Module):
                raise ValueError("load_state_dict: the state has policy weights but the policy is not a module")
            self.policy.load_state_dict(state_dict["policy_state_dict"])
        self.env.load_state_dict(state_dict.get("env_state_dict", {}))
        self._frames = int(state_dict.get("frames", 0))
        self._iter = int(state_dict.get("iter", 0))

    def shutdown(self, timeout: float | None = None, close_env: bool = True,
                 raise_on_error: bool = True) -> None:
        """Notify plugins and close the env; safe to call twice.

        As TorchRL's, the env is closed even when it was passed in as an instance; pass
        ``close_env=False`` to keep it open. ``timeout`` has no effect here (no workers), and
        ``raise_on_error=False`` swallows an error raised while closing.
        """
        if self._closed:
            return
        self._closed = True
        try:
            try:
                hook().reap_collector_shutdown(collector=self, worker_idx=self.worker_idx)
            finally:
                if close_env and not self.env.is_closed:
                    self.env.close()
        except Exception:
            if raise_on_error:
                raise

    @property
    def frames(self) -> int:
        """Frames collected so far."""
        return self._frames

    def __repr__(self) -> str:
        return (
            f"Collector(env={self.env!r}, frames_per_batch={self.frames_per_batch}, "
            f"total_frames={self.total_frames}, frames={self._frames}"
            + ("" if self._stepwise is None else f", path='tensordict' ({self.path_reason})") + ")"
        )


def _casting(act: Callable[[int], None], policy_actions: np.ndarray, actions: np.ndarray,
             spec) -> Callable[[int], None]:
    """``act``, which writes a step's action into ``policy_actions``, then that action cast into
    the env's ``actions`` (of the spec's dtype), refused before the env steps when the cast
    changed it (no allocation)."""
    changed = np.zeros(actions.shape[1:], dtype=bool)

    def act_and_cast(t: int) -> None:
        act(t)
        actions[t] = policy_actions[t]
        np.not_equal(actions[t], policy_actions[t], out=changed)
        if changed.any():
            check_cast_actions(policy_actions[t], spec)

    return act_and_cast


def counts_steps(env: EnvBase) -> bool:
    """Whether ``env`` counts its steps already: a ``"step_count"`` entry (a ``StepCounter``)."""
    return "step_count" in env.state_keys


def _with_step_counter(env: EnvBase, max_steps: int) -> EnvBase:
    """``env`` with a ``StepCounter(max_steps)``, as TorchRL's collectors add for ``max_frames_per_traj``."""
    from reap.envs.transforms import StepCounter, TransformedEnv

    if counts_steps(env):
        raise ValueError(
            "Collector: max_frames_per_traj adds a StepCounter, but the env already has a "
            "'step_count' entry; pass max_frames_per_traj=None and give that StepCounter "
            "max_steps instead"
        )
    return TransformedEnv(env, StepCounter(max_steps=max_steps))


SyncDataCollector = Collector
__all__ = ["Collector", "SyncDataCollector", "make_env"]
