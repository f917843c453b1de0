"""Evaluator(backend="process"): episodes played in a worker process, weights pushed to it, nothing left."""

import functools
from pathlib import Path

import pytest

from reap.collectors import Evaluator
from reap.envs.transforms import StepCounter, VecNormV2
from reap_testing import (
    ConstantPolicyFactory,
    constant_policy,
    env_fn,
    shm_left_by_us,
    shm_segments,
    transformed_env_fn,
    wait_gone,
    worker_pids,
)

FAST = {"mp_start_method": "forkserver"}




def test_episodes_in_a_worker_with_the_weights_pushed(shm_before):
    before = worker_pids()
    evaluator = Evaluator(env_fn(batch=2, episode_len=5), policy_factory=ConstantPolicyFactory(1.0), max_steps=20,
                          num_trajectories=3, backend="process", collector_kwargs=FAST)
    try:
        assert worker_pids() == before  # the worker starts with the first evaluation
        assert evaluator.evaluate(step=3)["eval/reward"] == 5.0
        workers = worker_pids() - before
        assert len(workers) == 1
        assert evaluator.evaluate(weights=constant_policy(3.0))["eval/reward"] == 15.0  # at once, not a batch late
        evaluator.trigger_eval(weights_dict={"policy": constant_policy(0.5)}, step=9)
        result = evaluator.wait(timeout=120)
        assert (result["eval/reward"], result["eval/step"], result["eval/num_episodes"]) == (2.5, 9, 3)
    finally:
        evaluator.shutdown()
    assert not wait_gone(workers)
    assert not shm_left_by_us(shm_segments() - shm_before)


def test_init_fn_runs_in_the_worker_and_vecnorm_is_frozen_there(tmp_path):
    marker = tmp_path / "init_ran"
    make_env = transformed_env_fn(VecNormV2(in_keys=["observation"]), episode_len=5)
    with Evaluator(make_env, policy_factory=ConstantPolicyFactory(2.0), max_steps=10, num_trajectories=2,
                   backend="process", init_fn=functools.partial(Path.write_text, marker, "ran"),
                   metrics_fn=NaNObservations(),
                   collector_kwargs=FAST) as evaluator:
        metrics = evaluator.evaluate()
    assert marker.read_text() == "ran"
    # frozen before it saw any data, the worker's VecNormV2 normalises to NaN (as TorchRL's does);
    # one that learned from the first reset would give finite observations
    assert metrics["eval/nan_observations"] == 1


class NaNObservations:
    """metrics_fn (run in the trainer's process, on what the worker collected)."""

    def __call__(self, trajectories):
        return {"nan_observations": int(trajectories["observation"].isnan().all())}


@pytest.mark.parametrize("make_env, length", [(transformed_env_fn(StepCounter(max_steps=4), episode_len=100), 4),
                                              (env_fn(episode_len=100), 7)])
def test_max_steps_cuts_episodes_in_the_worker_unless_the_env_counts_its_steps(make_env, length):
    with Evaluator(make_env, policy_factory=ConstantPolicyFactory(1.0), max_steps=7, num_trajectories=2,
                   backend="process", collector_kwargs=FAST) as evaluator:
        metrics = evaluator.evaluate()
    assert metrics["eval/episode_length"] == length and metrics["eval/reward"] == length



@pytest.mark.parametrize("env", [env_fn()(), None])
def test_the_process_backend_needs_factories(env):
    if env is None:
        with pytest.raises(ValueError, match="pass policy_factory"):
            Evaluator(env_fn(), constant_policy(1.0), backend="process")
    else:
        with pytest.raises(ValueError, match="env must be a callable that makes the env"):
            Evaluator(env, policy_factory=ConstantPolicyFactory(), backend="process")
