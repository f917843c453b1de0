"""Evaluator (TorchRL's): whole episodes, exact returns, sync and background runs, weights, errors.

EchoEnv's reward is the action, so a ConstantPolicy(w) scores exactly ``w * episode length``.
"""

import threading
import time

import pytest
import torch
from tensordict import TensorDict

from reap.collectors import Evaluator
from reap.collectors.evaluator import episode_metrics, freeze_vecnorm
from reap.envs import RewardSum, StepCounter, TransformedEnv
from reap.envs.transforms import Compose, VecNormV2
from reap.weight_update import WeightStrategy
from reap_testing import ConstantPolicyFactory, EchoEnv, RaisingPolicy, constant_policy


def evaluator_threads():
    return [t for t in threading.enumerate() if t.name == "evaluator-async" and t.is_alive()]


@pytest.fixture
def make():
    """Evaluators shut down after the test, whatever it asserted; none of their threads is left."""
    made = []

    def build(*args, **kwargs):
        made.append(Evaluator(*args, **kwargs))
        return made[-1]

    yield build
    for evaluator in made:
        evaluator.shutdown()
    assert not evaluator_threads()


def test_returns_and_lengths_of_whole_episodes(make):
    evaluator = make(EchoEnv(batch=3, episode_len=5), constant_policy(2.0), num_trajectories=4, max_steps=50)
    metrics = evaluator.evaluate(step=7)
    assert metrics["eval/reward"] == 10.0 and metrics["eval/reward_std"] == 0.0
    assert metrics["eval/num_episodes"] == 4 and metrics["eval/episode_length"] == 5.0
    assert metrics["eval/step"] == 7 and metrics["eval/fps"] > 0
    assert isinstance(metrics["eval/reward"], float) and isinstance(metrics["eval/num_episodes"], int)


def test_max_steps_cuts_episodes_and_an_env_step_counter_keeps_its_own_limit(make):
    assert make(EchoEnv(episode_len=100), constant_policy(1.0), num_trajectories=2,
                max_steps=7).evaluate()["eval/episode_length"] == 7.0
    env = TransformedEnv(EchoEnv(episode_len=100), StepCounter(max_steps=4))
    metrics = make(env, constant_policy(1.0), num_trajectories=2, max_steps=50).evaluate()
    assert metrics["eval/episode_length"] == 4.0 and metrics["eval/reward"] == 4.0


def test_reward_sum_is_read_first_else_reward_keys_is_summed(make):
    env = TransformedEnv(EchoEnv(batch=2, episode_len=3), RewardSum())
    metrics = make(env, constant_policy(3.0), num_trajectories=2, max_steps=10,
                   reward_keys=("next", "absent")).evaluate()
    assert metrics["eval/reward"] == 9.0
    evaluator = make(EchoEnv(episode_len=3), constant_policy(3.0), num_trajectories=2, max_steps=10,
                     reward_keys=("next", "absent"))
    with pytest.raises(KeyError, match=r"neither \('next', 'absent'\) \(reward_keys\) nor"):
        evaluator.evaluate()


def test_weights_in_every_form_are_loaded_before_the_episodes(make):
    policy = constant_policy(1.0)
    evaluator = make(EchoEnv(episode_len=5), policy, num_trajectories=2, max_steps=10)
    assert evaluator.evaluate(weights=constant_policy(2.0))["eval/reward"] == 10.0
    assert evaluator.evaluate(weights=Evaluator.extract_weights(constant_policy(3.0)))["eval/reward"] == 15.0
    assert evaluator.evaluate(weights_dict={"policy": constant_policy(4.0)})["eval/reward"] == 20.0
    assert evaluator.evaluate(weights=constant_policy(5.0).state_dict())["eval/reward"] == 25.0
    assert evaluator.evaluate()["eval/reward"] == 25.0  # none given: the policy as it is
    assert policy.training  # evaluated in eval mode, its mode restored
    with pytest.raises(ValueError, match=r"weights_dict has \['critic'\]; only the 'policy' weights"):
        evaluator.evaluate(weights_dict={"critic": constant_policy(1.0)})
    with pytest.raises(ValueError, match="missing"):
        evaluator.evaluate(weights=torch.nn.Linear(2, 2))


def test_background_evaluations_poll_wait_and_pending(make):
    evaluator = make(EchoEnv(episode_len=5, step_sleep=0.002), constant_policy(1.0), num_trajectories=3,
                     max_steps=10)
    assert not evaluator.pending and evaluator.poll() is None and evaluator.wait() is None
    assert evaluator.trigger_eval(weights=constant_policy(2.0), step=11)
    assert evaluator.pending
    assert evaluator.trigger_eval(step=12) is False  # busy_policy="skip"
    result = evaluator.wait(timeout=60)
    assert result["eval/reward"] == 10.0 and result["eval/step"] == 11
    assert not evaluator.pending and evaluator.poll() is None
    assert evaluator.trigger_eval()
    assert evaluator.poll(timeout=60)["eval/step"] == 0  # the counter of unnumbered evaluations


def test_busy_policy_queue_runs_in_order_and_error_raises(make):
    evaluator = make(EchoEnv(episode_len=5, step_sleep=0.002), constant_policy(1.0), num_trajectories=2,
                     max_steps=10, busy_policy="queue")
    evaluator.trigger_eval(weights=constant_policy(1.0), step=0)
    evaluator.trigger_eval(weights=constant_policy(2.0), step=1)
    first, second = evaluator.wait(timeout=60), evaluator.wait(timeout=60)
    assert (first["eval/step"], first["eval/reward"]) == (0, 5.0)
    assert (second["eval/step"], second["eval/reward"]) == (1, 10.0)
    erring = make(EchoEnv(episode_len=5, step_sleep=0.002), constant_policy(1.0), max_steps=10, busy_policy="error")
    erring.trigger_eval()
    with pytest.raises(RuntimeError, match="busy_policy='queue'"):
        erring.trigger_eval()


def test_on_result_gets_a_tensordict_and_its_error_becomes_a_warning(make):
    seen = []
    evaluator = make(EchoEnv(episode_len=5), constant_policy(1.0), num_trajectories=2, max_steps=10,
                     on_result=seen.append, log_prefix="test")
    evaluator.evaluate(step=42)
    evaluator.trigger_eval(step=43)
    evaluator.wait(timeout=60)
    assert [td["test/step"].item() for td in seen] == [42, 43]
    assert seen[0]["test/reward"].item() == 5.0 and seen[0].batch_size == torch.Size([])

    def broken(td):
        raise ZeroDivisionError("callback")

    with pytest.warns(UserWarning, match="on_result raised ZeroDivisionError"):
        metrics = make(EchoEnv(episode_len=5), constant_policy(1.0), num_trajectories=2, max_steps=10,
                       on_result=broken).evaluate()
    assert metrics["eval/reward"] == 5.0


def test_metrics_fn_adds_prefixed_metrics(make):
    metrics = make(EchoEnv(batch=2, episode_len=4), constant_policy(1.0), num_trajectories=3, max_steps=10,
                   metrics_fn=lambda trajs: {"rows": trajs.shape[0], "longest": trajs.shape[1]}).evaluate()
    assert metrics["eval/rows"] == 3 and metrics["eval/longest"] == 4


def test_factories_are_called_in_the_thread_that_runs_the_first_evaluation(make):
    threads = []

    def env_factory():
        threads.append(threading.current_thread().name)
        return EchoEnv(episode_len=3)

    def policy_factory(env):
        threads.append(threading.current_thread().name)
        assert isinstance(env, EchoEnv)
        return constant_policy(1.0)

    evaluator = make(env_factory, policy_factory=policy_factory, num_trajectories=2, max_steps=10)
    assert threads == []
    evaluator.trigger_eval(weights=constant_policy(2.0))
    assert evaluator.wait(timeout=60)["eval/reward"] == 6.0
    assert threads == ["evaluator-async", "evaluator-async"]
    assert make(env_factory, policy_factory=ConstantPolicyFactory(1.0), max_steps=5,
                num_trajectories=1).evaluate()["eval/reward"] == 3.0
    assert threads[-1] == "MainThread"


def test_an_error_in_a_background_evaluation_is_raised_by_wait(make):
    evaluator = make(EchoEnv(episode_len=3), RaisingPolicy("no action here"), max_steps=5)
    evaluator.trigger_eval()
    with pytest.raises(RuntimeError, match="the background evaluation failed") as info:
        evaluator.wait(timeout=60)
    assert "no action here" in repr(info.value.__cause__)
    assert not evaluator.pending


def test_shutdown_stops_a_running_evaluation_at_once():
    evaluator = Evaluator(EchoEnv(episode_len=10**9, step_sleep=0.01), constant_policy(1.0),
                          frames_per_batch=3000)  # a whole batch takes 30 s (and little memory to lay out)
    evaluator.trigger_eval()
    time.sleep(0.2)
    assert evaluator.pending
    start = time.monotonic()
    evaluator.shutdown(timeout=30)
    assert time.monotonic() - start < 5
    assert not evaluator.pending and not evaluator_threads()
    evaluator.shutdown()  # idempotent
    with pytest.raises(RuntimeError, match="it was shut down"):
        evaluator.evaluate()


def test_vecnorm_transforms_are_frozen_and_their_statistics_kept():
    env = TransformedEnv(EchoEnv(episode_len=4), Compose(StepCounter(), VecNormV2(in_keys=["observation"])))
    env.rollout(3, constant_policy(1.0))
    vecnorm = env.transform[1]
    before = TensorDict(vecnorm.state_dict()).clone()
    assert before.numel() and not before.is_empty()
    with Evaluator(env, constant_policy(1.0), num_trajectories=2, max_steps=10) as evaluator:
        assert vecnorm.frozen
        evaluator.evaluate()
    assert (TensorDict(vecnorm.state_dict()) == before).all()
    assert freeze_vecnorm(TransformedEnv(EchoEnv(), VecNormV2(in_keys=["observation"]))).transform.frozen


def test_state_dict_and_checks():
    with Evaluator(EchoEnv(episode_len=3), constant_policy(1.0), max_steps=5, num_trajectories=1) as evaluator:
        evaluator.evaluate()
        evaluator.evaluate()
        assert evaluator.state_dict() == {"step_counter": 2}
        evaluator.trigger_eval()
        with pytest.raises(RuntimeError, match="no pending, queued or unread evaluation"):
            evaluator.state_dict()
        evaluator.wait(timeout=60)
        evaluator.load_state_dict({"step_counter": 10})
        assert evaluator.evaluate()["eval/step"] == 10
        assert "backend='thread'" in repr(evaluator)


@pytest.mark.parametrize("kwargs, error", [
    ({}, "a policy or a policy_factory .* must be provided"),
    ({"policy": constant_policy(), "policy_factory": ConstantPolicyFactory()}, "not both"),
    ({"policy": constant_policy(), "backend": "invalid"}, "Unknown backend 'invalid'"),
    ({"policy": constant_policy(), "busy_policy": "replace"}, "Unknown busy_policy 'replace'"),
    ({"policy": constant_policy(), "num_trajectories": 0}, "num_trajectories must be a positive int"),
    ({"policy_factory": ConstantPolicyFactory(), "backend": "process", "env": EchoEnv()}, "env must be a callable"),
    ({"policy": constant_policy(), "backend": "process"}, "pass policy_factory"),
    ({"policy": constant_policy(), "collector_kwargs": {"frames_per_batch": 3}},
     r"collector_kwargs\['frames_per_batch'\]: pass Evaluator\(frames_per_batch=...\)"),
])
def test_bad_arguments_are_refused_with_the_fix(kwargs, error):
    env = kwargs.pop("env", EchoEnv)
    with pytest.raises(ValueError, match=error):
        Evaluator(env, **kwargs)


def test_episode_metrics_equal_torchrls():
    evaluator_module = pytest.importorskip("torchrl.collectors._evaluator")
    gen = torch.Generator().manual_seed(0)
    lengths = torch.tensor([5, 2, 7, 1])
    mask = torch.arange(7) < lengths[:, None]
    batch = TensorDict({("next", "reward"): torch.randn(4, 7, 1, generator=gen) * mask[..., None],
                        ("collector", "mask"): mask}, batch_size=[4, 7])
    for with_sums in (False, True):
        if with_sums:
            batch["next", "episode_reward"] = batch["next", "reward"].cumsum(1)
            batch["next", "step_count"] = torch.arange(1, 8).expand(4, 7)[..., None] * 3
        ours = episode_metrics(batch)
        theirs = evaluator_module._extract_metrics_from_trajectories(batch, ("next", "reward"), ("next", "done"), None)
        for name in ("reward", "reward_std", "num_episodes", "episode_length", "frame_count"):
            assert ours[name] == pytest.approx(theirs[name], rel=1e-6), name


class WithExtraState(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.linear = torch.nn.Linear(2, 2)
        self.count = torch.zeros(())

    def get_extra_state(self):
        return {"count": self.count.clone()}

    def set_extra_state(self, state):
        self.count = state["count"]


def test_weight_strategy_forms_and_extra_state():
    source = WithExtraState()
    source.count.fill_(7)
    strategy = WeightStrategy()
    weights = strategy.extract_weights(source)
    assert sorted(weights.keys(True, True)) == [("__extra_state__", "count"), ("linear", "bias"), ("linear", "weight")]
    assert weights["linear", "weight"].data_ptr() == source.linear.weight.data_ptr()
    for inplace in (True, False):
        dest = WithExtraState()
        strategy.apply_weights(dest, weights, inplace=inplace)
        assert dest.count.item() == 7 and torch.equal(dest.linear.weight, source.linear.weight)
        assert isinstance(dest.linear.weight, torch.nn.Parameter)
        assert (dest.linear.weight.data_ptr() == source.linear.weight.data_ptr()) is not inplace
    assert "__extra_state__" not in strategy.extract_weights(torch.nn.Linear(2, 2)).keys()
    state = WeightStrategy("state_dict").extract_weights(torch.nn.Linear(2, 1))
    dest = {"weight": torch.zeros(1, 2), "bias": torch.zeros(1)}
    strategy.apply_weights(dest, state)
    assert torch.equal(dest["weight"], state["weight"])
    with pytest.raises(ValueError, match="extract_as must be 'tensordict' or 'state_dict'"):
        WeightStrategy("pickle")
    with pytest.raises(ValueError, match="updated in place only"):
        strategy.apply_weights(dest, state, inplace=False)
    with pytest.raises(TypeError, match="source must be an nn.Module"):
        WeightStrategy("state_dict").extract_weights(3)


def test_weight_strategy_equals_torchrls():
    theirs = pytest.importorskip("torchrl.weight_update").WeightStrategy()
    source = WithExtraState()
    source.count.fill_(3)
    ours_weights, their_weights = WeightStrategy().extract_weights(source), theirs.extract_weights(source)
    assert (ours_weights == their_weights).all()
    mine, other = WithExtraState(), WithExtraState()
    WeightStrategy().apply_weights(mine, their_weights)
    theirs.apply_weights(other, ours_weights)
    assert mine.count == other.count == 3
    assert torch.equal(mine.linear.weight, other.linear.weight)
