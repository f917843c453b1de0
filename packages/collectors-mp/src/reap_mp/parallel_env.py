"""``ParallelEnv``: a batched env whose sub-envs step in worker processes.

Each worker builds its env and allocates one step of root and next arrays in shared memory.
To step, the parent writes every worker's action (and current root) into its shared arrays,
sends each a one-word command, waits for all of them, and copies the ``next`` rows back into
the caller's arrays: the sub-envs step concurrently and no observation is pickled. It
implements reap's array API (``_reset_into``/``_step_into``), so ``Collector`` drives it like
any batched env: ``Collector(ParallelEnv(4, make_env), policy, ...)`` yields ``[4, T]`` batches
(``[4, *sub_batch, T]`` for batched sub-envs).

Examples:
    >>> from reap import GymEnv  # doctest: +SKIP
    >>> from reap_mp import ParallelEnv
    >>> def make_env():
    ...     return GymEnv("CartPole-v1")
    >>> if __name__ == "__main__":
    ...     with ParallelEnv(2, make_env) as env:
    ...         print(env.rollout(5)["next", "observation"].shape)
    torch.Size([2, 5, 4])
"""

from __future__ import annotations

import pickle
from collections.abc import Callable, Sequence

import torch

from reap.collectors.lifetime import ForkserverUse, track, untrack
from reap.envs.base import EnvBase, checked_env, refuse_torchrl_env
from reap.envs.serial import (
    _ONLY,
    FULL_SPECS,
    ForwardedValues,
    SerialEnv,
    SubEnvFactories,
    env_kwargs,
    forwarded_method,
    needs_tensordicts,
    no_attribute,
    per_worker,
    resolve,
    split_reset,
    split_step,
    stack_sub_envs,
    sub_env_layout,
    updated_kwargs,
)
from reap_mp._procs import Payload, WorkerError, WorkerHandle, get_context, worker_session


def env_worker(idx, conn, payload):
    with worker_session(conn) as closers:
        create_env_fn, kwargs, num_threads, shared = payload.obj
        torch.set_num_threads(num_threads)
        env = create_env_fn(**kwargs)
        closers.append(getattr(env, "close", lambda: None))
        checked_env(env, "ParallelEnv")
        # heterogeneous (lazy-stacked) or non-tensor entries fit no array: such a sub-env steps on
        # TensorDicts sent by pipe
        on_tensordicts = needs_tensordicts(env) or env._skips_steps
        shared = shared and not on_tensordicts
        root_td = next_td = None
        if not on_tensordicts:
            _, _, root_td, next_td = env.allocate(1)
            if shared:
                root_td.share_memory_()
                next_td.share_memory_()
            root, nxt = leaf_arrays(root_td, env.root_specs()), leaf_arrays(next_td, env.next_specs())
        meta = {name: getattr(env, name) for name in FULL_SPECS}
        meta["device"] = env.device
        meta.update(layout=sub_env_layout(env), root_specs=env.root_specs(), next_specs=env.next_specs(),
                    state_keys=tuple(env.state_keys), passthrough_keys=tuple(env.passthrough_keys),
                    primed_action_keys=tuple(env._primed_action_keys()), on_tensordicts=on_tensordicts,
                    skips_steps=env._skips_steps)
        conn.send(("ready", meta, root_td if shared else None, next_td if shared else None))
        # with several action keys there is no single action: the env reads them all from root
        action = root[env.action_key] if len(env.action_keys) == 1 and not on_tensordicts else None
        while True:
            message = conn.recv()
            command = message[0]
            if command == "S":  # TensorDict mode: (input, stepped)
                sub, stepped = message[1]
                conn.send(("k", env.step(sub).get("next") if stepped else env._skip_tensordict(sub)))
            elif command == "R":
                conn.send(("k", env.reset(message[1], **message[2])))
            elif command == "s":
                if not shared:
                    for key, value in message[1].items():
                        root[key][0] = value
                env._step_into(None if action is None else action[0], 0, root, nxt)
                conn.send(("k",) if shared else ("k", nxt))
            elif command == "r":
                if not shared:
                    for key, value in message[2].items():
                        root[key][0] = value
                env._reset_into(root, 0, message[1])
                conn.send(("k",) if shared else ("k", root))
            elif command == "attr":  # TorchRL's attribute forwarding: (path, call, args, kwargs)
                _, path, call, args, kwargs = message
                try:
                    value = resolve(env, path)
                    reply = ("ok", value(*args, **kwargs) if call else (callable(value), None if callable(value) else value))
                except Exception as err:  # noqa: BLE001 - the caller's error, not the worker's
                    reply = ("err", err)
                try:
                    conn.send(reply)  # pickled before anything is written: a failure sends nothing
                except (pickle.PicklingError, TypeError, AttributeError) as err:  # what does not pickle
                    if reply[0] == "ok" and not call:  # an attribute's value stays here
                        conn.send(("ok", (False, NotSent(type(value).__qualname__))))
                    else:
                        conn.send(("err", RuntimeError(f"{reply[1]!r} does not pickle: {err}")))
            elif command == "seed":
                conn.send(("ok", env.set_seed(message[1], static_seed=message[2])))
            elif command == "close":
                break
            else:
                raise ValueError(f"unknown command {command!r}")


class NotSent:
    """Stands for a sub-env's attribute value that does not pickle: it stays in its worker,
    where its own attributes are still asked (``env.holder.count``)."""

    def __init__(self, type_name: str):
        self.type_name = type_name

    def __repr__(self) -> str:
        return f"<{self.type_name} in a ParallelEnv worker (not picklable)>"


def leaf_arrays(td, specs: dict) -> dict:
    """Numpy views of ``td``'s leaves, by the leaf keys of the array API (nested keys are tuples)."""
    return {key: td.get(key).numpy() for key in specs}


#: TorchRL's ``ParallelEnv`` keywords that tune its own buffers and processes: they change nothing here.
_TUNING = ("pin_memory", "share_individual_td", "memmap", "non_blocking", "use_buffers", "metadata_from_workers",
           "consolidate", "daemon")


def _check_settings(*, num_sub_threads, shutdown_timeout, num_threads) -> None:
    """ValueError naming the first of the workers' settings that is out of range."""
    if isinstance(num_sub_threads, bool) or not isinstance(num_sub_threads, int) or num_sub_threads < 1:
        raise ValueError(f"ParallelEnv: num_sub_threads must be a positive int, got {num_sub_threads!r}")
    if shutdown_timeout is not None and (not isinstance(shutdown_timeout, (int, float)) or shutdown_timeout < 0):
        raise ValueError(f"ParallelEnv: shutdown_timeout must be a non-negative number, got {shutdown_timeout!r}")
    if num_threads is not None and (isinstance(num_threads, bool) or not isinstance(num_threads, int)
                                    or num_threads < 1):
        raise ValueError(f"ParallelEnv: num_threads must be a positive int or None, got {num_threads!r}")


class ParallelEnv(SubEnvFactories, EnvBase):
    """Batch ``num_workers`` envs, each stepping in its own process.

    Args:
        num_workers: number of sub-envs (and processes).
        create_env_fn: a callable returning a reap env, or a list of ``num_workers`` of them.
        create_env_kwargs: keyword arguments for the constructors (one dict, or one per worker).
        shared_memory: step through shared-memory arrays (default); ``False`` sends the arrays
            over the pipes instead.
        mp_start_method: ``"spawn"`` (default), ``"forkserver"`` or ``"fork"``.
        worker_timeout: seconds a sub-env may take to answer before it is declared stuck.
        num_sub_threads: torch threads in each worker (default 1), as TorchRL's.
        device: None or the CPU (reap's envs step on the CPU; move batches with a collector's
            ``storing_device``).
        serial_for_single: with ``num_workers=1``, build a ``SerialEnv`` instead (TorchRL's).
        shutdown_timeout: seconds a worker is given to exit at ``close()`` before it is killed.
        num_threads: torch threads of this process while the workers run (set when they start,
            the previous count put back at ``close()``). Defaults to None: left as it is, where
            TorchRL takes one thread off per worker.

    TorchRL's other keywords are taken: those tuning its buffers and processes (``use_buffers``,
    ``pin_memory``, ``consolidate``, ...) change nothing here, and ``policy_proof`` and
    ``allow_step_when_done`` are taken at their defaults only.

    The workers start at construction; a closed ParallelEnv starts them again at its next
    ``reset()``, and :meth:`update_kwargs` restarts them with new constructor arguments.
    """

    def __new__(cls, *args, serial_for_single: bool = False, **kwargs):
        num_workers = kwargs.get("num_workers", args[0] if args else None)
        if serial_for_single and num_workers == 1:  # TorchRL's: a SerialEnv, of the same batch size
            fn = kwargs.get("create_env_fn", args[1] if len(args) > 1 else None)
            keep = {k: v for k, v in kwargs.items() if k not in ("num_workers", "create_env_fn", "worker_timeout")}
            return SerialEnv(1, fn, **keep)
        return super().__new__(cls, *args, **kwargs)

    def __init__(self, num_workers: int, create_env_fn: Callable | Sequence[Callable], *,
                 create_env_kwargs=None, shared_memory: bool = True, mp_start_method: str | None = None,
                 worker_timeout: float = 120.0, num_sub_threads: int = 1, device=None,
                 serial_for_single: bool = False, shutdown_timeout: float | None = None,
                 num_threads: int | None = None, **kwargs):
        self._handles: list[WorkerHandle] = []
        self.is_closed = True
        unknown = sorted(set(kwargs) - set(_TUNING) - set(_ONLY))
        if unknown:
            raise TypeError(f"ParallelEnv got unexpected keyword arguments {unknown}")
        for name, (default, instead) in _ONLY.items():
            if kwargs.get(name, default) is not default:
                raise ValueError(f"ParallelEnv: {name}={kwargs[name]!r} is not supported ({instead})")
        if device is not None and torch.device(device).type != "cpu":
            raise ValueError(f"ParallelEnv: device={device!r} is not supported; reap's envs step on the CPU (move "
                             "batches with the collector's storing_device)")
        _check_settings(num_sub_threads=num_sub_threads, shutdown_timeout=shutdown_timeout, num_threads=num_threads)
        self._shutdown_timeout = shutdown_timeout
        if isinstance(num_workers, bool) or not isinstance(num_workers, int) or num_workers < 1:
            raise ValueError(f"ParallelEnv: num_workers must be a positive int, got {num_workers!r}")
        fns = per_worker(create_env_fn, num_workers, "create_env_fn", "ParallelEnv", "callables")
        for fn in fns:
            refuse_torchrl_env(fn, "ParallelEnv")
            if isinstance(fn, EnvBase) or not callable(fn):
                raise TypeError(f"ParallelEnv: create_env_fn must be callables returning an env, got {fn!r}")
        if not isinstance(worker_timeout, (int, float)) or worker_timeout <= 0:
            raise ValueError(f"ParallelEnv: worker_timeout must be a positive number, got {worker_timeout!r}")
        self._create_env_fn = fns
        self._env_kwargs = env_kwargs(create_env_kwargs, num_workers, "ParallelEnv")
        self.shared_memory = bool(shared_memory)
        self.num_workers = num_workers
        self.num_threads = num_threads
        self._num_sub_threads = num_sub_threads
        self._worker_timeout = worker_timeout
        self._ctx = get_context(mp_start_method, "ParallelEnv")
        meta = self._start()
        super().__init__(batch_size=(num_workers, *meta["layout"][0]), device=meta["device"] if device is None else device)
        for name in FULL_SPECS:
            setattr(self, name, meta[name].expand(num_workers, *meta[name].shape))
        self._action_key = self.action_key if len(self.action_keys) == 1 else None
        plain_root, plain_next = EnvBase.root_specs(self), EnvBase.next_specs(self)
        self._extra_root = {k: v for k, v in meta["root_specs"].items() if k not in plain_root}
        self._extra_next = {k: v for k, v in meta["next_specs"].items() if k not in plain_next}
        self._state_keys = meta["state_keys"]
        self._sub_root_keys = tuple(meta["root_specs"])
        # what a reset writes back: the caller's root may hold more (policy outputs), and its actions
        # stay, but for those a TensorDictPrimer sets at reset
        self._primed = meta["primed_action_keys"]
        kept = set(self.action_keys) - set(self._primed)
        self._reset_keys_back = tuple(k for k in self._sub_root_keys if k not in kept)
        self._passthrough = meta["passthrough_keys"]
        # the sub-envs do not write passthrough entries (e.g. a TensorDictPrimer's): the caller's
        # "next" arrays hold them already (the root's value, or what the policy wrote)
        self._sub_next_keys = tuple(k for k in meta["next_specs"] if k not in self._passthrough)

    def _start(self) -> dict:
        """Start the workers and return sub-env 0's description (again after :meth:`close` or
        :meth:`update_kwargs`: every sub-env must keep the layout the env was built with)."""
        ctx = self._ctx
        self._forkserver = ForkserverUse() if ctx.get_start_method() == "forkserver" else None
        self._closed_procs = False
        self.is_closed = False
        track(self)
        if self.num_threads is not None:  # TorchRL's: this process's threads while the workers run
            self._threads_before = torch.get_num_threads()
            torch.set_num_threads(self.num_threads)
        try:
            payloads = [Payload((fn, kw, self._num_sub_threads, self.shared_memory))
                        for fn, kw in zip(self._create_env_fn, self._env_kwargs)]
            self._handles = [WorkerHandle(ctx, i, env_worker, (payload,), label="ParallelEnv worker",
                                          timeout=self._worker_timeout) for i, payload in enumerate(payloads)]
            ready = [h.recv(timeout=max(self._worker_timeout, 60.0)) for h in self._handles]
        except BaseException:
            self.close()
            raise
        meta = ready[0][1]
        rebuilt = "_layout" in self.__dict__
        layout = self._layout if rebuilt else meta["layout"]
        for i, (_, other, _, _) in enumerate(ready):
            if other["layout"] != layout:
                self.close()
                first = "those the env was built with" if rebuilt else "sub-env 0's"
                raise ValueError(f"ParallelEnv: every sub-env must have the same batch size and keys, with the same "
                                 f"shapes and dtypes; sub-env {i}'s differ from {first}")
        self._layout = layout
        self._on_tensordicts, self._skipping = meta["on_tensordicts"], meta["skips_steps"]
        self._w_root = [r[2] for r in ready]
        self._w_next = [r[3] for r in ready]
        self._w_root_np = [None if td is None else leaf_arrays(td, meta["root_specs"]) for td in self._w_root]
        self._w_next_np = [None if td is None else leaf_arrays(td, meta["next_specs"]) for td in self._w_next]
        return meta

    def update_kwargs(self, kwargs: dict | Sequence[dict]) -> None:
        """Update the sub-envs' constructor keyword arguments (TorchRL's): a dict updates every
        worker's, a list of ``num_workers`` dicts each one's. The workers are restarted with them
        now (reap starts them at construction; TorchRL, which starts them at its first reset,
        uses them there)."""
        self._env_kwargs = updated_kwargs(self._env_kwargs, kwargs, "ParallelEnv")
        if not self.is_closed:
            self.close()
            self._start()

    def configure_parallel(self, *, use_buffers=None, shared_memory: bool | None = None, memmap=None,
                           mp_start_method: str | None = None, num_threads: int | None = None,
                           num_sub_threads: int | None = None, non_blocking=None, daemon=None,
                           shutdown_timeout: float | None = None) -> ParallelEnv:
        """Set how the workers run (TorchRL's), for their next start; returns the env.

        reap's workers start at construction, so this is refused (RuntimeError) while they run:
        pass the keywords to ``ParallelEnv(...)``, or ``close()`` it first and they apply when
        ``reset()`` starts the workers again. ``use_buffers``, ``memmap``, ``non_blocking`` and
        ``daemon`` tune TorchRL's buffers and change nothing here, as in the constructor.

        Example:
            >>> env.close()  # doctest: +SKIP
            >>> env.configure_parallel(num_sub_threads=2).reset()  # doctest: +SKIP
        """
        if not self.is_closed:
            raise RuntimeError("ParallelEnv.configure_parallel cannot be called after the environment has started, "
                               "and reap's ParallelEnv starts its workers at construction: pass these keywords to "
                               "ParallelEnv(...), or close() it first (they apply when reset() starts the workers)")
        _check_settings(num_sub_threads=1 if num_sub_threads is None else num_sub_threads,
                        shutdown_timeout=shutdown_timeout, num_threads=num_threads)
        if shared_memory is not None:
            self.shared_memory = bool(shared_memory)
        if mp_start_method is not None:
            self._ctx = get_context(mp_start_method, "ParallelEnv")
        if num_threads is not None:
            self.num_threads = num_threads
        if num_sub_threads is not None:
            self._num_sub_threads = num_sub_threads
        if shutdown_timeout is not None:
            self._shutdown_timeout = shutdown_timeout
        return self

    def start(self) -> None:
        """TorchRL's: start the sub-envs if they are not running. reap's start at construction, so
        this only starts a closed env's workers again, as :meth:`reset` does."""
        if self.is_closed:
            self._start()

    def reset(self, tensordict=None, **kwargs):
        """:meth:`EnvBase.reset`; a closed ParallelEnv starts its workers again first (TorchRL's)."""
        self.start()
        return super().reset(tensordict, **kwargs)

    def root_specs(self):
        specs = super().root_specs()
        specs.update({k: v.expand(self.num_workers, *v.shape) for k, v in self._extra_root.items()})
        return specs

    def next_specs(self):
        specs = super().next_specs()
        specs.update({k: v.expand(self.num_workers, *v.shape) for k, v in self._extra_next.items()})
        return specs

    @property
    def state_keys(self):
        return self._state_keys

    @property
    def passthrough_keys(self):
        return self._passthrough

    def _primed_action_keys(self) -> tuple:
        return self._primed

    def __getattr__(self, name: str):
        """A public attribute the batched env lacks is its sub-envs', asked of the workers
        (TorchRL's forwarding): a list of their values (:class:`ForwardedValues`: ``env.nested.value``
        reads on in the workers; a value that does not pickle comes as a :class:`NotSent`), or for
        a method a callable that runs it in every worker and returns each one's result. Names
        starting with ``_`` are not forwarded."""
        if name.startswith("_") or not self.__dict__.get("_handles"):
            raise no_attribute(self, name)
        if self.is_closed:
            raise no_attribute(self, name, " (the env is closed: its sub-envs are gone)")
        return self._forwarded((name,))

    def _forwarded(self, path: tuple):
        answers = self._ask_workers(path, False)  # (is a method, the value if not) from every worker
        if answers[0][0]:
            return forwarded_method(path[-1], lambda *args, **kwargs: self._ask_workers(path, True, args, kwargs))
        return ForwardedValues([value for _, value in answers], path, self._forwarded)

    def _ask_workers(self, path: tuple, call: bool, args=(), kwargs=None, ids=None) -> list:
        self._check_open()
        ids = range(self.num_workers) if ids is None else ids
        for i in ids:
            self._send(i, ("attr", path, call, args, kwargs or {}))
        replies = self._gather(ids)
        name = ".".join(path)
        for i, (status, value) in zip(ids, replies):
            if status == "err":
                if isinstance(value, AttributeError):
                    raise no_attribute(self, name, ", nor have its sub-envs") from None
                raise RuntimeError(f"ParallelEnv: sub-env {i}'s {name} raised {type(value).__name__}: {value}") from value
        return [value for _, value in replies]

    # ---- TensorDicts (sub-envs with heterogeneous or non-tensor entries, which no array holds) --
    @property
    def _torchrl_style(self) -> bool:
        return self._on_tensordicts

    @property
    def _skips_steps(self) -> bool:
        return self._skipping

    @property
    def _use_buffers(self) -> bool:
        """TorchRL's flag: whether the sub-envs step through shared buffers (reap's arrays)."""
        return not self._on_tensordicts

    def _reset(self, tensordict=None, **kwargs):
        self._check_open()
        ids = []
        for i, sub in enumerate(split_reset(self, tensordict)):
            if sub is not False:
                self._send(i, ("R", sub, kwargs))
                ids.append(i)
        outs = [None] * self.num_workers
        for i, reply in zip(ids, self._gather(ids)):
            outs[i] = reply[1]
        return stack_sub_envs(outs)

    def _step(self, tensordict):
        self._check_open()
        for i, message in enumerate(split_step(tensordict)):
            self._send(i, ("S", message))
        return stack_sub_envs([reply[1] for reply in self._gather(range(self.num_workers))])

    # ---- array API -------------------------------------------------------------------------
    def _gather(self, ids) -> list:
        replies = []
        for i in ids:
            try:
                replies.append(self._handles[i].recv())
            except WorkerError:
                self.close()
                raise
        return replies

    def _send(self, i, message) -> None:
        try:
            self._handles[i].send(message)
        except WorkerError:
            self.close()
            raise

    def _check_open(self) -> None:
        if self.is_closed:
            raise RuntimeError("ParallelEnv: the env is closed")

    def _step_into(self, action, t, root, nxt):
        self._check_open()
        n = self.num_workers
        for i in range(n):
            if self.shared_memory:
                w_root = self._w_root_np[i]
                for key, dest in w_root.items():
                    dest[0] = root[key][t][i]
                if action is not None:
                    w_root[self._action_key][0] = action[i]
                self._send(i, ("s",))
            else:
                data = {key: root[key][t][i] for key in self._sub_root_keys}
                if action is not None:
                    data[self._action_key] = action[i]
                self._send(i, ("s", data))
        replies = self._gather(range(n))
        for i in range(n):
            source = self._w_next_np[i] if self.shared_memory else replies[i][1]
            for key in self._sub_next_keys:
                nxt[key][t][i] = source[key][0]

    def _reset_into(self, root, t, mask):
        self._check_open()
        ids = []
        for i in range(self.num_workers):
            if mask is not None and not mask[i].any():
                continue
            sub_mask = None if mask is None or mask[i].ndim == 0 else mask[i].copy()
            if self.shared_memory:
                for key, dest in self._w_root_np[i].items():
                    dest[0] = root[key][t][i]
                self._send(i, ("r", sub_mask))
            else:
                self._send(i, ("r", sub_mask, {key: root[key][t][i] for key in self._sub_root_keys}))
            ids.append(i)
        replies = self._gather(ids)
        for i, reply in zip(ids, replies):
            source = self._w_root_np[i] if self.shared_memory else reply[1]
            for key in self._reset_keys_back:
                root[key][t][i] = source[key][0]

    def set_seed(self, seed=None, static_seed=False):
        """Seed the sub-envs one after the other, as ``SerialEnv`` does; returns the next seed."""
        for i in range(self.num_workers):
            self._send(i, ("seed", seed, static_seed))
            seed = self._gather([i])[0][1]
        return seed

    def close(self, *, raise_if_closed: bool = True) -> None:
        """Stop the workers; safe to call twice (also at interpreter exit and on collection), so
        ``raise_if_closed`` (TorchRL's: raise on a closed env) changes nothing."""
        if getattr(self, "_closed_procs", False):
            return
        self._closed_procs = True
        untrack(self)
        grace = getattr(self, "_shutdown_timeout", None)
        for handle in self._handles:
            if grace is None:
                handle.close()
            else:
                handle.close(grace)
        if getattr(self, "_forkserver", None) is not None:
            self._forkserver.release()
            self._forkserver = None
        if getattr(self, "_threads_before", None) is not None:
            torch.set_num_threads(self._threads_before)
            self._threads_before = None
        self._w_root = self._w_next = self._w_root_np = self._w_next_np = []
        self.is_closed = True

    shutdown = close

    @property
    def worker_pids(self) -> list[int]:
        return [h.pid for h in self._handles if not h.closed]

    def __del__(self):
        try:
            self.close()
        except Exception:  # noqa: BLE001 - interpreter teardown
            pass

    def __repr__(self) -> str:
        return f"ParallelEnv(num_workers={self.num_workers}, batch_size={tuple(self.batch_size)})"
