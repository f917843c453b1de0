"""RayEvalWorker and Evaluator(backend="ray"): episodes played in a Ray actor, exact returns, no actor left."""

import pytest

from reap.collectors import Evaluator
from reap.collectors.distributed import RayEvalWorker
from reap_ray import RayStartError
from reap_ray.testing import reap_actors_alive, wait_no_reap_actors
from reap_testing import ConstantPolicyFactory, constant_policy, env_fn


def test_evaluator_ray_backend_plays_episodes_with_the_weights_given():
    evaluator = Evaluator(env_fn(batch=2, episode_len=5), policy_factory=ConstantPolicyFactory(1.0), max_steps=20,
                          num_trajectories=3, backend="ray", num_gpus=0)
    try:
        assert len(reap_actors_alive()) == 1
        metrics = evaluator.evaluate(step=4)
        assert (metrics["eval/reward"], metrics["eval/episode_length"], metrics["eval/step"]) == (5.0, 5.0, 4)
        assert evaluator.evaluate(weights=constant_policy(3.0))["eval/reward"] == 15.0
        evaluator.trigger_eval(weights=constant_policy(0.5), step=8)
        result = evaluator.wait(timeout=120)
        assert (result["eval/reward"], result["eval/step"], result["eval/num_episodes"]) == (2.5, 8, 3)
    finally:
        evaluator.shutdown()
    assert not wait_no_reap_actors()


def test_worker_submit_poll_and_a_cut_episode():
    worker = RayEvalWorker(None, env_fn(episode_len=100), ConstantPolicyFactory(2.0), num_gpus=0, num_trajectories=2)
    try:
        assert worker.poll() is None  # nothing submitted
        worker.submit(None, max_steps=7)
        result = worker.poll(timeout=120)
        assert (result["reward"], result["episode_length"], result["num_episodes"]) == (14.0, 7.0, 2)
        with pytest.raises(ValueError, match="leave break_when_any_done=True"):
            worker.submit(None, 7, break_when_any_done=False)
    finally:
        worker.shutdown()
        worker.shutdown()  # idempotent
    assert not wait_no_reap_actors()


def test_an_actor_asking_for_a_gpu_the_cluster_lacks_is_refused_at_once():
    with pytest.raises(RayStartError, match=r"RayEvalWorker: actor 0 asks for \{CPU: 1, GPU: 1\}"):
        Evaluator(env_fn(), policy_factory=ConstantPolicyFactory(), backend="ray")  # TorchRL's num_gpus=1
    assert not reap_actors_alive()
