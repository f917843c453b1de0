"""VecNormV2(stateful=False): statistics carried in the data, exact running means, errors.

EchoEnv's first observation entry counts the steps into the episode (0 at the reset), so with
``decay=1`` the statistics after step t are the mean of 0..t+1 over t+2 values.
"""

import pytest
import torch

from reap.collectors import Collector
from reap.envs import EnvCreator, TransformedEnv, VecNormV2, check_env_specs
from reap_testing import EchoEnv, constant_policy


def stateless_env(**kwargs):
    return TransformedEnv(EchoEnv(batch=2, episode_len=4),
                          VecNormV2(in_keys=["observation"], stateful=False, decay=1.0, **kwargs))


def test_statistics_are_observations_updated_each_step_and_started_anew_at_a_reset():
    rollout = stateless_env().rollout(6, constant_policy(1.0), break_when_any_done=False)
    steps = torch.tensor([0, 1, 2, 3, 0, 1]) + 1.0  # the "next" observation's count into the episode
    count = rollout["next", "_vecnorm_count", "observation"][0, :, 0]
    loc = rollout["next", "_vecnorm_loc", "observation"][0, :, 0]
    assert count.tolist() == (steps + 1).tolist()
    torch.testing.assert_close(loc, steps / 2)
    var = rollout["next", "_vecnorm_var", "observation"][0, :, 0]  # the mean of the squares
    torch.testing.assert_close(var, steps * (2 * steps + 1) / 6)
    spread = (var - loc**2).sqrt().clamp_min(1e-4)
    torch.testing.assert_close(rollout["next", "observation"][0, :, 0], (steps - loc) / spread)
    within = rollout["_vecnorm_count", "observation"][0, 1:4]  # the root of the next step, within the episode
    assert torch.equal(within, rollout["next", "_vecnorm_count", "observation"][0, :3])
    assert rollout["_vecnorm_count", "observation"][0, 4, 0] == 1  # after the reset: its observation alone


def test_a_collector_carries_the_statistics_and_keeps_them_out_of_batches():
    env = stateless_env()
    env.set_seed(3)
    rollout = env.rollout(8, constant_policy(1.0), break_when_any_done=False)
    with Collector(stateless_env(), constant_policy(1.0), frames_per_batch=16, total_frames=16) as collector:
        collector.set_seed(3)
        batch = next(iter(collector))
    assert not any(str(key).startswith("_vecnorm") for key in batch.keys())
    assert torch.equal(batch["observation"], rollout["observation"])
    assert torch.equal(batch["next", "observation"], rollout["next", "observation"])


def test_two_stateless_vecnorms_keep_their_statistics_apart():
    env = TransformedEnv(EchoEnv(episode_len=4), VecNormV2(in_keys=["observation"], stateful=False))
    env.append_transform(VecNormV2(in_keys=["reward"], stateful=False))
    first, second = env.transform[0].prefix, env.transform[1].prefix
    assert first == "_vecnorm" and second.startswith("_vecnorm") and second != first
    check_env_specs(env)
    rollout = env.rollout(3, constant_policy(2.0))
    assert rollout["next", f"{second}_count", "reward"].flatten().tolist() == [1, 2, 3]  # none at the reset
    assert rollout["next", "_vecnorm_count", "observation"][:, 0].tolist() == [2, 3, 4]


def test_frozen_keeps_the_statistics_it_reads():
    env = stateless_env()
    env.transform.freeze()
    rollout = env.rollout(3, constant_policy(1.0))
    assert (rollout["next", "_vecnorm_count", "observation"] == 0).all()


def test_what_a_stateless_vecnorm_cannot_do_is_refused_with_torchrls_errors():
    norm = VecNormV2(in_keys=["observation"], stateful=False)
    assert norm.state_dict() == {"_extra_state": {}}  # TorchRL's: nothing kept
    with pytest.raises(NotImplementedError, match="denorm is not implemented for stateless"):
        norm.denorm(None)
    with pytest.raises(RuntimeError, match="cannot be computed with a stateless VecNormV2"):
        _ = norm.loc
    with pytest.raises(RuntimeError, match="frozen copy of a stateless VecNorm"):
        norm.frozen_copy()
    with pytest.raises(RuntimeError, match="reduce_batch_dims=True and stateful=False are not supported"):
        VecNormV2(in_keys=["observation"], stateful=False, reduce_batch_dims=True)
    with pytest.raises(ValueError, match="shared_data needs stateful=True"):
        VecNormV2(in_keys=["observation"], stateful=False, shared_data={})


def test_env_creator_leaves_stateless_statistics_in_the_data():
    make = EnvCreator(stateless_env)
    rollout = make().rollout(2, constant_policy(1.0))
    assert rollout["next", "_vecnorm_count", "observation"][0, :, 0].tolist() == [2, 3]
