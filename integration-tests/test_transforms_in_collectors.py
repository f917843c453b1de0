"""A stack of TorchRL-style transforms, and ``MultiStep`` as ``postproc``, inside every collector.

The single-process ``Collector`` batch equals the env's own TensorDict rollout step for step; the
multi-process collectors' batches hold the same keys and satisfy what each transform promises.
"""

import sys

import cloudpickle
import pytest
import torch
from tensordict.nn import TensorDictModule

import reap
from reap import (
    CatFrames,
    Collector,
    Compose,
    ExcludeTransform,
    FrameSkipTransform,
    GymEnv,
    InitTracker,
    MultiStep,
    NoopResetEnv,
    RenameTransform,
    RewardScaling,
    RewardSum,
    StepCounter,
    TensorDictPrimer,
    TransformedEnv,
    UnsqueezeTransform,
)
from reap.specs import Unbounded

pytestmark = pytest.mark.slow

# worker processes cannot import a test file: send its functions by value (lambdas go through
# cloudpickle in reap_mp)
cloudpickle.register_pickle_by_value(sys.modules[__name__])

KEYS = {
    "action", "done", "terminated", "truncated", "obs", "stack", "step_count", "is_init", "h",
    "episode_reward", ("collector", "traj_ids"),
    *(("next", k) for k in ("done", "terminated", "truncated", "obs", "stack", "step_count", "is_init",
                            "h", "episode_reward", "reward")),
}
POSTPROC_KEYS = {"steps_to_next_obs", "gamma", "nonterminal", ("next", "original_reward")}


def make_env():
    return TransformedEnv(GymEnv("Pendulum-v1"), Compose(
        NoopResetEnv(3),
        StepCounter(max_steps=7),
        InitTracker(),
        FrameSkipTransform(2),
        RewardScaling(loc=0.0, scale=0.5),
        RewardSum(),
        CatFrames(N=2, dim=-1, in_keys=["observation"], out_keys=["stack"]),
        UnsqueezeTransform(-2, in_keys=["stack"], out_keys=["stack_1"]),
        ExcludeTransform("stack_1"),
        RenameTransform(["observation"], ["obs"]),
        TensorDictPrimer({"h": Unbounded(shape=(2,))}, default_value=1.0),
    ))


def policy():
    return TensorDictModule(torch.nn.Linear(3, 1), in_keys=["obs"], out_keys=["action"])


def check_promises(batch):
    obs, nxt = batch["obs"], batch["next"]
    assert torch.equal(nxt["stack"][..., 3:], nxt["obs"])  # CatFrames: newest frame last
    assert torch.equal(nxt["stack"][..., :3], obs)  # the frame before
    assert torch.equal(batch["stack"][..., 3:], obs)
    assert torch.equal(nxt["step_count"], batch["step_count"] + 1)
    assert torch.equal(batch["is_init"], batch["step_count"] == 0) and not nxt["is_init"].any()
    assert batch["is_init"].any()  # the batch crosses resets (StepCounter truncates at 7)
    assert torch.equal(nxt["truncated"], nxt["step_count"] == 7)
    assert (batch["h"] == 1.0).all() and (nxt["h"] == 1.0).all()
    # FrameSkip(2) then RewardScaling(0.5): each reward is half of two Pendulum rewards in [-16.3, 0]
    assert (nxt["reward"] <= 0).all() and (nxt["reward"] >= -16.3).all()
    fresh = batch["is_init"]
    running = torch.where(fresh, torch.zeros_like(nxt["reward"]), batch["episode_reward"])
    torch.testing.assert_close(nxt["episode_reward"], running + nxt["reward"])


def test_collector_batch_equals_the_env_rollout():
    env = make_env()
    module = policy()
    with Collector(make_env(), module, frames_per_batch=30, total_frames=30) as collector:
        torch.manual_seed(1)
        collector.set_seed(0)
        (batch,) = list(collector)
    assert set(batch.keys(True, True)) == KEYS
    check_promises(batch)
    env.set_seed(0)
    torch.manual_seed(1)
    with torch.no_grad():
        ref = env.rollout(30, module, break_when_any_done=False)
    for key in ref.keys(True, True):
        assert torch.equal(batch.get(key), ref.get(key)), key


@pytest.mark.parametrize("kind", ["Collector", "MultiSyncCollector", "MultiAsyncCollector"])
def test_transform_stack_and_multistep_in_every_collector(kind):
    pytest.importorskip("reap_mp")
    cls = getattr(reap, kind)
    env_arg = make_env if kind == "Collector" else [lambda: make_env()] * 2
    # forkserver: the workers fork from one server that imported reap once (spawn pays that per worker)
    options = {} if kind == "Collector" else {"mp_start_method": "forkserver"}
    with cls(env_arg, policy(), frames_per_batch=40, total_frames=120,
             postproc=MultiStep(gamma=0.9, n_steps=3), **options) as collector:
        collector.set_seed(0)
        batches = list(collector)
    assert len(batches) == 3
    for batch in batches:
        keys = {k for k in batch.keys(True, True) if not (isinstance(k, tuple) and k[0] == "collector")}
        assert keys | {("collector", "traj_ids")} == KEYS | POSTPROC_KEYS
        original = batch.clone()
        original["next"].update({"reward": batch["next", "original_reward"]})
        one_step = batch["steps_to_next_obs"] == 1
        torch.testing.assert_close(batch["next", "reward"][one_step], original["next", "reward"][one_step])
        # MultiStep moved the "next" entries ahead: undo what it gathered to check the transforms
        assert (batch["steps_to_next_obs"] <= 3).all() and (batch["steps_to_next_obs"] > 1).any()
        for row in _rows(batch):
            check_promises(_without_multistep(row))


def _rows(batch):
    return [batch] if batch.ndim == 1 else list(batch.unbind(0))


def _without_multistep(batch):
    """The batch as collected: each step's "next" is the next step's root, except at resets."""
    out = batch.exclude("steps_to_next_obs", "gamma", "nonterminal").clone()
    out["next"] = out["next"].exclude("original_reward")
    out["next", "reward"] = batch["next", "original_reward"]
    T = batch.shape[-1]
    for t in range(T - 1):
        if not batch["next", "done"][t].any():
            for key in ("obs", "stack", "step_count", "is_init", "h", "episode_reward"):
                out["next", key][t] = batch[key][t + 1]
    return out[: T - 1]
