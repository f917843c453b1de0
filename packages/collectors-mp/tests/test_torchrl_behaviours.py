"""TorchRL behaviours of the multi-process collectors: ``isinstance(..., MultiCollector)``,
``len()``, and a user-held ``VanillaWeightUpdater`` that reaches the workers."""

import functools

import pytest
import torch
from tensordict.nn import TensorDictModule

from reap import MultiCollector, VanillaWeightUpdater
from reap_mp import MultiAsyncCollector, MultiSyncCollector
from reap_testing import constant_policy, env_fn

FAST = "forkserver"


def _linear(value: float):
    module = torch.nn.Linear(2, 1)
    with torch.no_grad():
        module.weight.fill_(value)
        module.bias.zero_()
    return TensorDictModule(module, in_keys=["observation"], out_keys=["action"])


@pytest.mark.parametrize("cls", [MultiSyncCollector, MultiAsyncCollector])
def test_isinstance_multicollector_and_len(cls):
    assert issubclass(cls, MultiCollector)
    with cls([env_fn(), env_fn()], None, frames_per_batch=8, total_frames=20, mp_start_method=FAST) as c:
        assert isinstance(c, MultiCollector)
        assert len(c) == 3 == len(list(c))
    with cls([env_fn(), env_fn()], None, frames_per_batch=8, mp_start_method=FAST) as endless:
        with pytest.raises(RuntimeError, match="never stops and has no length"):
            len(endless)


@pytest.mark.parametrize("cls", [MultiSyncCollector, MultiAsyncCollector])
def test_user_held_vanilla_updater_reaches_the_workers(cls):
    trainer, updater = _linear(0.0), VanillaWeightUpdater()
    with cls([env_fn(), env_fn()], trainer, frames_per_batch=8, weight_updater=updater,
             mp_start_method=FAST) as collector:
        updater.push_weights(_linear(1.0))  # explicit weights
        batch = collector.next()
        assert torch.equal(batch["action"], batch["observation"].sum(-1, keepdim=True))
        with torch.no_grad():
            trainer.module.weight.fill_(2.0)
        updater.push_weights()  # no weights: the collector's policy, the trainer's module
        # async: batches collected before the push may come first (each of the 2 workers keeps
        # 2 rollouts queued, plus the one it is running)
        for _ in range(8):
            batch = collector.next()
            if torch.equal(batch["action"], 2 * batch["observation"].sum(-1, keepdim=True)):
                break
        else:
            raise AssertionError("the workers never ran the pushed weights")
    with cls([env_fn(), env_fn()], policy_factory=functools.partial(constant_policy, 0.0), frames_per_batch=8,
             weight_updater=VanillaWeightUpdater(), mp_start_method=FAST) as collector:
        with pytest.raises(ValueError, match="no weights given and the collector has no policy"):
            collector.weight_updater.vanilla.push_weights()


def test_max_frames_per_traj_adds_step_count_in_every_worker():
    with MultiSyncCollector([env_fn(episode_len=100)] * 2, None, frames_per_batch=8, total_frames=8,
                            max_frames_per_traj=3, mp_start_method=FAST) as collector:
        batch = collector.next()
    assert batch["next", "step_count"][..., 0].tolist() == [[1, 2, 3, 1], [1, 2, 3, 1]]
    assert batch["step_count"].dtype == torch.int64
    assert batch["next", "truncated"][..., 0].tolist() == [[False, False, True, False]] * 2
