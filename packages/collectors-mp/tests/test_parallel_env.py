"""ParallelEnv: sub-envs in worker processes behind reap's array API."""

import functools
import pickle

import pytest
import torch

from reap import Collector, GymEnv, SerialEnv
from reap_mp import ParallelEnv, WorkerError
from reap_testing import (
    AgentsEnv,
    CountingEnv,
    GrowingEnv,
    UnequalAgentsEnv,
    constant_policy,
    env_fn,
    pid_alive,
)

FAST = "forkserver"


def _batches(env, n=3, frames=24):
    env.set_seed(3)
    with Collector(env, constant_policy(1.5), frames_per_batch=frames, total_frames=n * frames) as c:
        return [b for b in c]


@pytest.mark.parametrize("shared_memory", [True, False])
def test_collector_over_parallel_env_matches_serial_env(shared_memory):
    make = env_fn(episode_len=3)
    with ParallelEnv(4, make, shared_memory=shared_memory, mp_start_method=FAST) as env:
        assert env.batch_size == (4,)
        batches = _batches(env)
    serial = _batches(SerialEnv(4, make))
    for got, want in zip(batches, serial):
        assert got.batch_size == (4, 6)
        for key in [("next", "observation"), "observation", ("next", "done"), ("next", "reward")]:
            assert torch.equal(got[key], want[key]), key


def test_batched_sub_envs_and_rollout():
    with ParallelEnv(2, env_fn(batch=3), mp_start_method=FAST) as env:
        assert env.batch_size == (2, 3)
        assert env.rollout(4, break_when_any_done=False)["next", "observation"].shape == (2, 3, 4, 2)
        with Collector(env, constant_policy(), frames_per_batch=24, total_frames=24) as c:
            assert next(iter(c)).batch_size == (2, 3, 4)
        pids = env.worker_pids
    assert not any(pid_alive(p) for p in pids)


def _agents_policy(root_action: bool):
    """Each agent adds 1; the root action (when the env has one) is 1 too."""
    def policy(td):
        td.set(("agents", "action"), torch.ones(2, 2, 3, dtype=torch.int64))
        return td.set("action", torch.ones(2, 2, 1, dtype=torch.int64)) if root_action else td
    return policy


@pytest.mark.parametrize("shared_memory", [True, False])
@pytest.mark.parametrize("root_action", [False, True], ids=["nested-action", "several-actions"])
def test_nested_keys_and_several_actions_step_as_in_serial_env(shared_memory, root_action):
    # TorchRL's multi-agent layout: a group with its own batch dims, done flags and reward; with
    # root_action there is no single action key, so the workers read every action from root
    make = functools.partial(AgentsEnv, root_action=root_action)
    with ParallelEnv(2, make, shared_memory=shared_memory, mp_start_method=FAST) as env:
        assert env.full_action_spec == SerialEnv(2, make).full_action_spec
        assert env.full_done_spec["agents"].shape == (2, 2, 3)
        got = env.rollout(4, _agents_policy(root_action), break_when_any_done=False)
    want = SerialEnv(2, make).rollout(4, _agents_policy(root_action), break_when_any_done=False)
    assert set(got.keys(True, True)) == set(want.keys(True, True))
    assert (got == want).all()
    # counts 1, 2, 3 (done at 3, reset), 1
    assert got["next", "agents", "obs"][0, 0, :, 0, 0].tolist() == [1.0, 2.0, 3.0, 1.0]


def test_nested_done_resets_only_its_sub_env():
    # TorchRL's rule: ("agent", "done") firing in one sub-env resets that sub-env only
    kwargs = [{"limit": 2.0, "group": "agent"}, {"limit": 3.0, "group": "agent"}]
    with ParallelEnv(2, CountingEnv, create_env_kwargs=kwargs, mp_start_method=FAST) as env:
        td, counts = env.reset(), []
        for _ in range(5):
            stepped, td = env.step_and_maybe_reset(td.set("action", torch.ones(2, 1)))
            counts.append(stepped["next", "observation"].flatten().tolist())
    assert counts == [[1, 1], [2, 2], [1, 3], [2, 1], [1, 2]]


def test_heterogeneous_sub_envs_step_on_tensordicts_as_in_serial_env():
    # a lazy-stacked group fits no shared array: the workers step on TensorDicts sent by pipe
    kwargs = [{"limit": 2}, {"limit": 3}]
    serial = SerialEnv(2, UnequalAgentsEnv, create_env_kwargs=kwargs)
    with ParallelEnv(2, UnequalAgentsEnv, create_env_kwargs=kwargs, mp_start_method=FAST) as env:
        assert env.full_observation_spec == serial.full_observation_spec
        got = [env.reset()]
        want = [serial.reset()]
        for _ in range(4):
            for out, e in ((got, env), (want, serial)):
                stepped, root = e.step_and_maybe_reset(out[-1].set("action", torch.ones(2, 1)))
                out[-1:] = [stepped, root]
        rollout = env.rollout(3, break_when_any_done=False)
    for a, b in zip(got, want):
        assert set(a.keys(True, True)) == set(b.keys(True, True))
        for i in range(2):  # sub-env by sub-env (their groups do not stack)
            assert (a[i] == b[i]).all()
    assert got[3]["next", "agents"][0][1]["obs"].tolist() == [2.0, 2.0, 2.0]  # sub-env 0 reset at step 2
    assert rollout["next", "agents"][1, 2][0]["obs"].tolist() == [3.0, 3.0]
    with pytest.raises(RuntimeError, match="ParallelEnv: the env is closed"):
        env.rand_step()


def test_public_attributes_and_methods_are_asked_of_the_workers():
    # TorchRL's forwarding: what ParallelEnv lacks, each worker's sub-env answers
    kwargs = [{"limit": 2.0}, {"limit": 3.0}]
    with ParallelEnv(2, CountingEnv, create_env_kwargs=kwargs, mp_start_method=FAST) as env:
        env.rollout(2, lambda td: td.set("action", torch.tensor([[1.0], [2.0]])), break_when_any_done=False)
        assert env.limit == [2.0, 3.0]
        assert env.scaled_count(10.0) == [20.0, 40.0]
        with pytest.raises(RuntimeError, match="ParallelEnv: sub-env 0's scaled_count raised ValueError: factor must"):
            env.scaled_count(0)
        with pytest.raises(AttributeError, match="no attribute 'nothing', nor have its sub-envs"):
            _ = env.nothing
        assert not hasattr(env, "_flags")  # private names are not forwarded
        assert env.scaled_count() == [2.0, 4.0]  # the workers live on after an error
    with pytest.raises(AttributeError, match=r"no attribute 'limit' \(the env is closed"):
        _ = env.limit


@pytest.mark.parametrize("break_when_any_done", [True, False])
def test_sub_envs_with_dynamic_dims_step_on_tensordicts_as_alone(break_when_any_done):
    # an observation whose spec has a -1 dim grows step by step: no array holds it, so SerialEnv
    # and ParallelEnv step such sub-envs on TensorDicts (they wrote into fixed arrays and failed)
    alone = [GrowingEnv(n).rollout(8, return_contiguous=False, break_when_any_done=break_when_any_done)
             for n in (2, 3)]
    steps = min(r.shape[0] for r in alone)
    for env in (SerialEnv(2, [functools.partial(GrowingEnv, 2), functools.partial(GrowingEnv, 3)]),
                ParallelEnv(2, [functools.partial(GrowingEnv, 2), functools.partial(GrowingEnv, 3)], mp_start_method=FAST)):
        with env:
            rollout = env.rollout(8, return_contiguous=False, break_when_any_done=break_when_any_done)
        assert rollout.shape[:2] == (2, steps if break_when_any_done else 8)
        for i, single in enumerate(alone):
            for t in range(steps):
                for key in ("observation", ("next", "observation"), ("next", "done")):
                    assert torch.equal(rollout[i, t][key], single[t][key])
        # sub-env 1 grows to 4 rows, and starts again at 1 (2 after its first step) when reset
        assert [rollout[1, t]["next", "observation"].shape[0] for t in range(steps)] == ([2, 3, 4] * 3)[:steps]


def test_attribute_chains_read_on_in_the_workers():
    # TorchRL's env.nested.value / env.nested.get_value(): each link is asked of every worker
    with ParallelEnv(2, CountingEnv, create_env_kwargs=[{"limit": 2.0}, {"limit": 3.5}], mp_start_method=FAST) as env:
        assert env.limit.real == [2.0, 3.5]
        assert env.limit.is_integer() == [True, False]  # called in each worker
        with pytest.raises(AttributeError, match="no attribute 'limit.nothing', nor have its sub-envs"):
            _ = env.limit.nothing
        assert pickle.loads(pickle.dumps(env.limit)) == [2.0, 3.5]
    with ParallelEnv(2, functools.partial(GymEnv, "CartPole-v1"), mp_start_method=FAST) as env:
        # GymEnv.lib is the gymnasium module, which does not pickle: it stays in the workers,
        # and what is read through it comes back
        assert [type(v).__name__ for v in env.lib] == ["NotSent", "NotSent"]
        assert "module in a ParallelEnv worker" in repr(env.lib[0])
        assert [spec.id for spec in env.lib.spec("CartPole-v1")] == ["CartPole-v1", "CartPole-v1"]


def test_closed_env_starts_again_at_reset():
    # TorchRL's: close() stops the workers, reset() starts new ones; stepping a closed env is refused
    env = ParallelEnv(2, env_fn(), mp_start_method=FAST)
    first = env.worker_pids
    env.close()
    assert env.is_closed and not any(pid_alive(pid) for pid in first)
    with pytest.raises(RuntimeError, match="ParallelEnv: the env is closed"):
        env.rand_step()
    try:
        assert env.reset()["observation"].shape == (2, 2) and not env.is_closed
        assert set(env.worker_pids).isdisjoint(first)
        assert env.rollout(3)["next", "observation"].shape == (2, 3, 2)
        second = env.worker_pids
        env.close()
        env.start()  # TorchRL's start(): the same, without the reset
        assert not env.is_closed and set(env.worker_pids).isdisjoint(first + second)
        env.start()  # running: nothing happens
        third = env.worker_pids
        assert env.rand_step()["next", "observation"].shape == (2, 2)
    finally:
        env.close()
    assert not any(pid_alive(pid) for pid in first + second + third)


@pytest.mark.parametrize("cls", ["serial", "parallel"])
def test_update_kwargs_rebuilds_the_sub_envs(cls):
    # TorchRL's update_kwargs: a dict updates every worker's kwargs, a list each one's
    make = SerialEnv if cls == "serial" else functools.partial(ParallelEnv, mp_start_method=FAST)
    env = make(2, CountingEnv, create_env_kwargs=[{"limit": 2.0}, {"limit": 3.0}])
    try:
        assert env.create_env_fn == [CountingEnv, CountingEnv]  # TorchRL's attributes
        env.update_kwargs({"limit": 4.0})
        assert env.limit == [4.0, 4.0] and env.create_env_kwargs == [{"limit": 4.0}, {"limit": 4.0}]
        env.update_kwargs([{"limit": 1.0}, {}])
        assert env.limit == [1.0, 4.0]  # updated, not replaced
        assert env.create_env_kwargs == [{"limit": 1.0}, {"limit": 4.0}]
        td = env.rollout(2, lambda td: td.set("action", torch.ones(2, 1)), break_when_any_done=False)
        assert td["next", "done"][:, :, 0].tolist() == [[True, True], [False, False]]
        for error in (RuntimeError, ValueError):  # TorchRL raises a RuntimeError, reap's names the fix too
            with pytest.raises(error, match=r"len\(kwargs\) and num_workers mismatch: kwargs has 1 dicts but "
                                            r"num_workers=2; pass one, or exactly num_workers of them"):
                env.update_kwargs([{"limit": 1.0}])
        assert env.limit == [1.0, 4.0]
        name = "SerialEnv" if cls == "serial" else "ParallelEnv"
        with pytest.raises(TypeError, match=f"{name}: kwargs must be a dict or a list of num_workers dicts, got 5"):
            env.update_kwargs(5)
        with pytest.raises(TypeError, match=rf"{name}: kwargs must be a dict .*, got \('limit', 1.0\)"):
            env.update_kwargs([("limit", 1.0), {}])
        assert env.limit == [1.0, 4.0]
    finally:
        env.close()
    with pytest.raises(TypeError, match="create_env_kwargs must be a dict or a list of num_workers dicts, got 2.0"):
        make(2, CountingEnv, create_env_kwargs=2.0)


def test_num_threads_is_this_process_s_while_the_workers_run():
    before = torch.get_num_threads()
    env = ParallelEnv(2, env_fn(), num_threads=before + 3, mp_start_method=FAST)
    try:
        assert torch.get_num_threads() == before + 3
    finally:
        env.close()
    assert torch.get_num_threads() == before
    with pytest.raises(ValueError, match="ParallelEnv: num_threads must be a positive int or None, got 0"):
        ParallelEnv(2, env_fn(), num_threads=0)


def test_configure_parallel_applies_at_the_next_start():
    # TorchRL's: refused once the workers run (reap's run from construction); a closed env takes the
    # settings when reset() starts its workers again
    env = ParallelEnv(2, env_fn(), mp_start_method=FAST)
    try:
        with pytest.raises(RuntimeError, match=r"configure_parallel cannot be called after the environment has "
                                               r"started, .* pass these keywords to ParallelEnv\(\.\.\.\), or "
                                               r"close\(\) it first"):
            env.configure_parallel(num_threads=1)
        env.close()
        before = torch.get_num_threads()
        with pytest.raises(ValueError, match="ParallelEnv: num_sub_threads must be a positive int, got 0"):
            env.configure_parallel(num_sub_threads=0)
        assert env.configure_parallel(num_threads=before + 2, shared_memory=False, use_buffers=True) is env
        assert env.is_closed and torch.get_num_threads() == before
        assert env.reset()["observation"].shape == (2, 2)
        assert torch.get_num_threads() == before + 2 and env.shared_memory is False
        assert env.rollout(3)["next", "observation"].shape == (2, 3, 2)
    finally:
        env.close()
    assert torch.get_num_threads() == before


def test_gym_env_with_num_workers_is_a_parallel_env_of_gym_envs():
    # TorchRL's GymEnv(id, num_workers=n): n processes, each a GymEnv with the other keywords
    env = GymEnv("CartPole-v1", num_workers=2, categorical_action_encoding=True)
    try:
        assert isinstance(env, ParallelEnv) and env.num_workers == 2 and env.batch_size == (2,)
        assert env.action_spec.shape == (2,)  # Categorical, the keyword reached the workers
        pids = env.worker_pids
        env.set_seed(0)
        first = env.reset()["observation"]
    finally:
        env.close()
    assert not any(pid_alive(pid) for pid in pids)
    serial = SerialEnv(2, functools.partial(GymEnv, "CartPole-v1", categorical_action_encoding=True))
    serial.set_seed(0)
    assert torch.equal(first, serial.reset()["observation"])  # seeded as a SerialEnv of the same envs
    assert not isinstance(GymEnv("CartPole-v1", num_envs=2), ParallelEnv)  # gymnasium's own vector env


def test_sub_envs_of_different_layouts_are_refused():
    with pytest.raises(ValueError, match=r"ParallelEnv: every sub-env must have the same batch size and keys, with "
                                         r"the same shapes and dtypes; sub-env 1's differ from sub-env 0's"):
        ParallelEnv(2, [env_fn(), env_fn(batch=3)], mp_start_method=FAST)


def test_sub_envs_with_strings_step_on_tensordicts_as_in_serial_env():
    # a string fits no array: SerialEnv and ParallelEnv step such sub-envs on TensorDicts (they
    # refused them), and a collector over them takes the strings into its batches
    from reap_testing.labels import labelled_env

    want = SerialEnv(2, labelled_env)
    want.set_seed(0)
    want = want.rollout(4, break_when_any_done=False)
    with ParallelEnv(2, labelled_env, mp_start_method=FAST) as env:
        env.set_seed(0)
        got = env.rollout(4, break_when_any_done=False)
        with Collector(env, None, frames_per_batch=8, total_frames=16) as collector:
            batches = list(collector)
    assert [list(row) for row in got["label"]] == [["reset", "step 1", "step 2", "step 3"]] * 2
    assert [list(row) for row in got["next", "label"]] == [list(row) for row in want["next", "label"]]
    assert got["observation"][:, 0].equal(want["observation"][:, 0])  # the same seeds
    assert [list(row) for row in batches[1]["next", "label"]] == [["step 5", "step 6", "step 7", "step 8"]] * 2


@pytest.mark.parametrize("shared_memory", [True, False])
def test_primer_of_an_action_key_shows_in_reset_output(shared_memory):
    # as SerialEnv's (and TorchRL's): reset() returns the action entries a TensorDictPrimer sets
    from reap import GymEnv, TensorDictPrimer, TransformedEnv
    from reap.specs import Bounded

    primed = lambda: TransformedEnv(  # noqa: E731 (a lambda goes to the workers by value)
        GymEnv("Pendulum-v1"), TensorDictPrimer(default_value=1.0, action=Bounded(-2.0, 2.0, (1,))))
    env = ParallelEnv(2, primed, mp_start_method=FAST, shared_memory=shared_memory)
    try:
        assert env.reset()["action"].tolist() == [[1.0], [1.0]]
        assert env.rollout(2)["action"].shape == (2, 2, 1)
    finally:
        env.close()


def test_sub_env_error_names_the_worker():
    env = ParallelEnv(2, [env_fn(), env_fn(fail_at=2)], mp_start_method=FAST)
    pids = env.worker_pids
    with pytest.raises(WorkerError, match=r"(?s)ParallelEnv worker 1 raised ValueError: EchoEnv exploded"):
        with Collector(env, constant_policy(), frames_per_batch=8, total_frames=8) as c:
            list(c)
    assert env.is_closed and not any(pid_alive(p) for p in pids)


@pytest.mark.parametrize("shared_memory", [True, False])
def test_policy_outputs_and_hidden_transform_arrays_over_resets(shared_memory):
    # a composite policy writes "loc" into the collector's root; a sub-env's transforms keep a
    # hidden array (the raw observation CatFrames replaced): neither may trip the resets
    from functools import partial

    from tensordict.nn import TensorDictModule, TensorDictSequential

    from reap import CatFrames, TransformedEnv

    make = partial(TransformedEnv, env_fn(episode_len=3)(), CatFrames(2, -1, in_keys=["observation"]))
    policy = TensorDictSequential(
        TensorDictModule(lambda obs: obs[..., :1] * 0 + 0.5, in_keys=["observation"], out_keys=["loc"]),
        TensorDictModule(lambda loc: loc * 2, in_keys=["loc"], out_keys=["action"]))
    with ParallelEnv(2, make, shared_memory=shared_memory, mp_start_method=FAST) as env:
        with Collector(env, policy, frames_per_batch=16, total_frames=32) as collector:
            batches = list(collector)
    for batch in batches:
        assert not any(str(k).startswith("_hidden") for k in batch.keys(True, True))
        assert batch["next", "done"].any() and (batch["loc"] == 0.5).all()
        assert torch.equal(batch["next", "observation"][..., :2], batch["observation"][..., 2:])


def test_primer_entries_keep_the_root_value_or_what_the_policy_writes():
    from functools import partial

    from tensordict.nn import TensorDictModule

    from reap import TensorDictPrimer, TransformedEnv
    from reap.specs import Unbounded

    make = partial(TransformedEnv, env_fn(episode_len=3)(),
                   TensorDictPrimer({"h": Unbounded(shape=(2,))}, default_value=0.5))
    silent = TensorDictModule(lambda obs: obs[..., :1] * 0 + 1.0, in_keys=["observation"], out_keys=["action"])
    writer = TensorDictModule(lambda obs, h: (obs[..., :1] * 0 + 1.0, h + 1.0), in_keys=["observation", "h"],
                              out_keys=["action", ("next", "h")])
    with Collector(ParallelEnv(2, make, mp_start_method=FAST), silent, frames_per_batch=12,
                   total_frames=12) as collector:
        (batch,) = list(collector)
    assert (batch["next", "h"] == 0.5).all()  # as TorchRL: "next" holds the root's value
    with Collector(ParallelEnv(2, make, mp_start_method=FAST), writer, frames_per_batch=12,
                   total_frames=12) as collector:
        (batch,) = list(collector)
    assert torch.equal(batch["next", "h"], batch["h"] + 1.0)
    assert batch["next", "h"].max() > 1.5  # carried from step to step until a reset


def test_torchrl_keywords():
    make = env_fn()
    with ParallelEnv(2, make, device="cpu", mp_start_method=FAST, num_threads=4, num_sub_threads=1, use_buffers=True,
                     pin_memory=False, consolidate=False, non_blocking=True, shutdown_timeout=5.0) as env:
        assert env.device == torch.device("cpu") and env.batch_size == (2,)
        assert env.rollout(2)["next", "observation"].shape == (2, 2, 2)
        env.close(raise_if_closed=False)
        env.close()  # idempotent: raise_if_closed changes nothing
    single = ParallelEnv(1, make, serial_for_single=True, mp_start_method=FAST, worker_timeout=5.0)
    assert type(single) is SerialEnv and single.batch_size == (1,)  # TorchRL's: no process for one env
    for kwargs, error, match in [
        ({"device": "cuda"}, ValueError, r"ParallelEnv: device='cuda' is not supported; reap's envs step on the CPU"),
        ({"policy_proof": len}, ValueError, r"ParallelEnv: policy_proof=.* is not supported \(reap's envs take any"),
        ({"allow_step_when_done": True}, ValueError, r"allow_step_when_done=True is not supported"),
        ({"num_sub_threads": 0}, ValueError, r"ParallelEnv: num_sub_threads must be a positive int, got 0"),
        ({"shutdown_timeout": -1}, ValueError, r"shutdown_timeout must be a non-negative number, got -1"),
        ({"bogus": 1}, TypeError, r"ParallelEnv got unexpected keyword arguments \['bogus'\]"),
    ]:
        with pytest.raises(error, match=match):
            ParallelEnv(2, make, **kwargs)


@pytest.mark.parametrize("start_method", [FAST, "fork"])
def test_traj_counter_is_shared_by_the_workers(start_method):
    from reap.envs.transforms import TrajCounter
    from reap_testing import transformed_env_fn

    counter = TrajCounter()
    with ParallelEnv(2, transformed_env_fn(counter, episode_len=3), mp_start_method=start_method) as env:
        rollout = env.rollout(9, break_when_any_done=False)
    counts = rollout["next", "traj_count"].squeeze(-1)
    per_trajectory = counts[:, ::3]  # each worker's episodes are 3 steps long
    assert sorted(per_trajectory.flatten().tolist()) == list(range(6))  # no number given twice
    assert torch.equal(counts, per_trajectory.repeat_interleave(3, dim=1))
    assert counter.state_dict() == {"traj_count": 6}  # the workers took them from this process's counter
