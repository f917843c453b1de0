"""The transforms TorchRL users reach for, without TorchRL: values, the hidden arrays, errors.

(test_transforms_torchrl.py compares them with TorchRL's step by step when TorchRL is installed.)
"""

import numpy as np
import pytest
import torch
from tensordict import TensorDict

import reap
from reap import (
    CatFrames,
    CatTensors,
    Collector,
    Compose,
    EnvCreator,
    ExcludeTransform,
    FrameSkipTransform,
    GymEnv,
    MultiStep,
    NoopResetEnv,
    RenameTransform,
    RewardClipping,
    RewardScaling,
    SelectTransform,
    SerialEnv,
    StepCounter,
    TensorDictPrimer,
    TransformedEnv,
    UnsqueezeTransform,
    check_env_specs,
)
from reap.specs import Unbounded
from reap_testing import CountingEnv

ONES = [torch.ones(1)] * 5


def test_catframes_stacks_the_last_frames_and_pads_at_reset():
    env = TransformedEnv(CountingEnv(limit=100.0), CatFrames(3, -1, in_keys=["observation"]))
    td = env.rollout(4, actions=ONES)
    assert td["observation"].tolist() == [[0, 0, 0], [0, 0, 1], [0, 1, 2], [1, 2, 3]]
    assert td["next", "observation"].tolist() == [[0, 0, 1], [0, 1, 2], [1, 2, 3], [2, 3, 4]]
    assert env.observation_spec["observation"].shape == (3,)
    constant = TransformedEnv(CountingEnv(limit=2.0), CatFrames(2, -1, in_keys=["observation"], padding="constant",
                                                              padding_value=-1.0))
    td = constant.rollout(4, actions=ONES, break_when_any_done=False)
    assert td["observation"].tolist() == [[-1, 0], [0, 1], [-1, 0], [0, 1]]  # a reset after step 2


def test_catframes_as_inverse_is_for_buffers_and_an_env_with_it_does_not_run():
    message = "CatFrames as inverse is not supported as a transform for environments, only for replay buffers."
    with pytest.warns(UserWarning, match=message):  # TorchRL builds it and refuses its rollout
        env = TransformedEnv(CountingEnv(), CatFrames(2, -1, in_keys=["observation"], as_inverse=True))
    with pytest.raises(ValueError, match=message):
        env.rollout(2, actions=ONES)


def test_hidden_arrays_stay_out_of_batches_and_cost_no_copy():
    env = TransformedEnv(CountingEnv(limit=3.0), reap.Compose(
        StepCounter(), RenameTransform(["observation"], ["obs"]), ExcludeTransform("step_count")))
    assert any(k.startswith("_hidden:") for k in env.root_specs())  # step_count is still counted
    with Collector(env, lambda obs: torch.ones_like(obs), frames_per_batch=6, total_frames=6) as collector:
        (batch,) = list(collector)
    assert sorted(batch.keys()) == ["action", "collector", "done", "next", "obs", "terminated", "truncated"]
    assert batch["next", "obs"].flatten().tolist() == [1.0, 2.0, 3.0, 1.0, 2.0, 3.0]
    assert not any(k.startswith("_hidden") for k in env.reset().keys())


def test_cattensors_unsqueeze_and_select():
    env = TransformedEnv(GymEnv("Pendulum-v1"), reap.Compose(
        RenameTransform(["observation"], ["a"], create_copy=True),
        CatTensors(["observation", "a"], "vec"), UnsqueezeTransform(-2, in_keys=["vec"])))
    td = env.rollout(3)
    assert td["next", "vec"].shape == (3, 1, 6)
    assert torch.equal(td["next", "vec"][:, 0, :3], td["next", "vec"][:, 0, 3:])  # "a" is a copy
    assert torch.equal(td["next", "vec"][:-1, 0, :3], td["vec"][1:, 0, :3])
    assert sorted(env.observation_spec.keys()) == ["vec"]  # del_keys=True removed the inputs
    sel = TransformedEnv(GymEnv("Pendulum-v1"), reap.Compose(StepCounter(), SelectTransform("observation")))
    # state entries stay, as TorchRL's SelectTransform keeps them (its reset then fails on step_count)
    assert sorted(sel.reset().keys()) == ["done", "observation", "step_count", "terminated", "truncated"]
    assert sorted(sel.observation_spec.keys()) == ["observation"]


def test_reward_transforms_frame_skip_and_primer():
    env = TransformedEnv(CountingEnv(limit=100.0), reap.Compose(
        FrameSkipTransform(3), RewardScaling(loc=1.0, scale=2.0), RewardClipping(clamp_max=6.5),
        TensorDictPrimer({"h": Unbounded(shape=(2,))}, default_value=0.5)))
    td = env.rollout(2, actions=ONES)
    assert td["next", "observation"].flatten().tolist() == [3.0, 6.0]  # each action applied 3 times
    assert td["next", "reward"].flatten().tolist() == [6.5, 6.5]  # 3 * 2 + 1 = 7, clipped
    assert (td["h"] == 0.5).all() and (td["next", "h"] == 0.5).all()


def test_noop_reset_steps_after_each_reset():
    env = TransformedEnv(CountingEnv(limit=100.0), NoopResetEnv(3, random=False))
    torch.manual_seed(0)
    first = env.reset()["observation"].item()
    torch.manual_seed(0)
    expected = sum(CountingEnv().action_spec.rand().item() for _ in range(3))
    assert first == pytest.approx(expected)
    batched = r"The parent environment batch-size is non-null: \(2,\); it works on a single env.*SerialEnv"
    with pytest.warns(UserWarning, match=batched):  # TorchRL builds it, and refuses its first reset
        refused = TransformedEnv(SerialEnv(2, CountingEnv), NoopResetEnv())
    with pytest.raises(ValueError, match=batched):
        refused.reset()
    inside = SerialEnv(2, lambda: TransformedEnv(CountingEnv(limit=100.0), NoopResetEnv(2, random=False)))
    assert (inside.reset()["observation"] > 0).all()
    none = TransformedEnv(CountingEnv(limit=100.0), NoopResetEnv(0, random=False))  # TorchRL's: no steps
    assert none.reset()["observation"].item() == 0.0


def test_multistep_postproc_in_a_collector():
    env = TransformedEnv(CountingEnv(limit=3.0), StepCounter())
    with Collector(env, lambda observation: torch.ones_like(observation), frames_per_batch=6, total_frames=6,
                   postproc=MultiStep(gamma=0.5, n_steps=2)) as collector:
        (batch,) = list(collector)
    assert batch["next", "original_reward"].flatten().tolist() == [1.0] * 6
    assert batch["next", "reward"].flatten().tolist() == [1.5, 1.5, 1.0, 1.5, 1.5, 1.0]
    assert batch["steps_to_next_obs"].tolist() == [2, 2, 1, 2, 2, 1]
    assert batch["next", "observation"].flatten().tolist() == [2.0, 3.0, 3.0, 2.0, 3.0, 3.0]
    assert batch["gamma"].tolist() == [0.25, 0.25, 0.5, 0.25, 0.25, 0.5]


def test_env_creator_builds_envs_and_reads_specs():
    make = EnvCreator(GymEnv, {"env_name": "CartPole-v1"})
    assert make.action_spec.n == 2 and make.observation_spec["observation"].shape == (4,)
    env = make(num_envs=2)
    assert env.batch_size == (2,)
    env.close()
    with pytest.raises(TypeError, match="create_env_fn must be a callable"):
        EnvCreator(CountingEnv())


def test_env_creator_refuses_envs_whose_statistics_do_not_match_the_first_ones():
    from reap.envs import VecNorm

    built = []

    def make_env():
        built.append(1)
        norms = [VecNorm(in_keys=["observation"])] * (1 if len(built) == 1 else 2)
        return TransformedEnv(CountingEnv(), Compose(*(n.clone() for n in norms)))

    make = EnvCreator(make_env)
    with pytest.raises(RuntimeError, match="this env has 2 transforms with statistics to share and the first one it "
                                           "made had 1; create_env_fn must build the same transforms each time"):
        make()


@pytest.mark.parametrize("build,error,match", [
    (lambda: RewardClipping(), ValueError, "give clamp_min, clamp_max or both"),
    (lambda: RewardClipping(1.0, 0.0), ValueError, "clamp_min=1.0 must not exceed clamp_max=0.0"),
    (lambda: CatFrames(0, -1), ValueError, "N must be a positive int"),
    (lambda: CatFrames(2, 0), ValueError, "dim must be < 0"),
    (lambda: CatFrames(2, -1, padding="reflect"), ValueError, "padding must be one of"),
    (lambda: UnsqueezeTransform(1), RuntimeError, "dim should be smaller than 0"),
    (lambda: FrameSkipTransform(0), ValueError, "frame_skip should have a value greater or equal to one"),
    (lambda: NoopResetEnv(0), ValueError, "noops must be an int of at least 1 with random=True, got 0"),
    (lambda: NoopResetEnv(-1, random=False), ValueError, "noops must be an int of at least 0 with random=False"),
    (lambda: MultiStep(0.9, 0), ValueError, "n_steps must be a positive int"),
    (lambda: MultiStep(1.5, 2), ValueError, "gamma must be in"),
    (lambda: RenameTransform(["a", "b"], ["c"]), ValueError, r"number of in_keys \(2\) should match .* \(1\)"),
    (lambda: RenameTransform(["a"], ["a"]), ValueError, "Cannot have matching in and out_keys"),
    (lambda: CatTensors(dim=-2), ValueError, "Lazy call to CatTensors is only supported when `dim=-1`"),
])
def test_bad_arguments_are_named(build, error, match):
    with pytest.raises(error, match=match):
        build()


@pytest.mark.parametrize("transform,match", [
    (lambda: RenameTransform(["done"], ["finished"]), r"the done flags \(done, terminated, truncated\) must stay"),
    (lambda: ExcludeTransform("terminated"), r"the done flags \(done, terminated, truncated\) must stay"),
    (lambda: ExcludeTransform("action"), "Key action not found in the environment outputs"),
])
def test_transforms_refuse_what_the_collector_needs(transform, match):
    with pytest.raises((ValueError, KeyError), match=match):
        TransformedEnv(CountingEnv(), transform())


def test_insert_transform_rebuilds_the_chain():
    env = TransformedEnv(CountingEnv(limit=100.0), RenameTransform(["observation"], ["obs"]))
    env.insert_transform(0, CatFrames(2, -1, in_keys=["observation"]))
    td = env.rollout(2, actions=ONES)
    assert td["next", "obs"].tolist() == [[0.0, 1.0], [1.0, 2.0]]
    with pytest.raises(ValueError, match=r"Index expected to be between \[-2, 2\] got index=5"):
        env.insert_transform(5, StepCounter())
    assert len(env.transform) == 2  # the chain as it was
    assert np.array_equal(env.fake_tensordict()["obs"].shape, (2,))


def test_sign_and_binarize_reward_values_and_specs():
    from reap.envs.transforms import BinarizeReward, SignTransform
    from reap.specs import Binary, Bounded

    env = TransformedEnv(GymEnv("Pendulum-v1"), Compose(
        RenameTransform(["observation"], ["sign"], create_copy=True), SignTransform(in_keys=["sign", "reward"]),
        BinarizeReward(out_keys=["positive"])))
    check_env_specs(env, seed=0)
    td = env.rollout(5)
    assert torch.equal(td["next", "sign"], td["next", "observation"].sign())
    assert (td["next", "reward"] == -1).all()  # Pendulum's rewards are negative
    assert td["next", "positive"].dtype == torch.int8 and (td["next", "positive"] == 0).all()
    assert env.observation_spec["sign"] == Bounded(-1.0, 1.0, shape=(3,))
    assert env.full_reward_spec["reward"] == Bounded(-1.0, 1.0, shape=(1,))
    assert env.full_reward_spec["positive"] == Binary(n=1, shape=(1,))
    with pytest.raises(RuntimeError, match=r"BinarizeReward: the reward's last dim must be 1, got a reward of shape \(2,\)"):
        BinarizeReward()(TensorDict(reward=torch.ones(2)))


def test_remove_empty_specs_drops_empty_entries_from_specs_and_outputs():
    from reap.envs import EnvBase
    from reap.envs.transforms import RemoveEmptySpecs
    from reap.specs import Composite, Unbounded

    class WithEmpty(EnvBase):
        def __init__(self):
            super().__init__(batch_size=[2])
            self.observation_spec = Composite(observation=Unbounded((2, 3)), shape=(2,),
                                              other=Composite(inner=Composite(shape=(2,)), shape=(2,)))
            self.action_spec = Unbounded((2, 3))
            self.reward_spec = Composite(reward=Unbounded((2, 1)), other_reward=Composite(shape=(2,)), shape=(2,))

        def _reset(self, td):
            return self.observation_spec.rand().update(self.full_done_spec.zero())

        def _step(self, td):
            return self.observation_spec.rand().update(self.full_done_spec.zero()).update(self.full_reward_spec.rand())

        def _set_seed(self, seed):
            pass

    assert ("next", "other", "inner") in WithEmpty().rollout(2).keys(True)
    env = TransformedEnv(WithEmpty(), RemoveEmptySpecs())
    assert list(env.observation_spec.keys(True)) == ["observation"]
    assert list(env.full_reward_spec.keys(True)) == ["reward"]
    check_env_specs(env)
    td = env.rollout(3)
    assert sorted(td["next"].keys()) == ["done", "observation", "reward", "terminated"]  # the done spec's flags
    assert "other" not in td.keys()


def test_primer_callable_default_for_a_scalar_entry():
    """A callable default value of a 0-d entry (TorchRL's test_dict_default_value): written at
    every reset, on the arrays path too (a 0-d entry's row is a NumPy scalar, not a view)."""
    from reap.specs import Categorical

    primer = reap.TensorDictPrimer(mykey=Categorical(3, dtype=torch.int64),
                                   default_value={"mykey": lambda: torch.tensor(1, dtype=torch.int64)})
    env = reap.TransformedEnv(reap.GymEnv("CartPole-v1"), primer)
    assert env.reset()["mykey"].item() == 1
    rollout = env.rollout(3)
    assert rollout["mykey"].tolist() == [1, 1, 1]


def test_primer_of_an_action_key_shows_in_reset_output():
    """As TorchRL's: a TensorDictPrimer that sets an action entry at reset makes reset() return
    it (TorchRL's test_transform_env with the action among the primed keys), in a SerialEnv too."""

    def make():
        env = GymEnv("Pendulum-v1")
        return TransformedEnv(env, TensorDictPrimer(default_value=1.0, action=env.action_spec.clone()))

    assert make().reset()["action"].tolist() == [1.0]
    assert SerialEnv(2, make).reset()["action"].tolist() == [[1.0], [1.0]]
    plain = TransformedEnv(GymEnv("Pendulum-v1"), TensorDictPrimer(other=Unbounded(shape=(2,))))
    assert "action" not in plain.reset().keys()


def _skipping(cond, base=None):
    """Pendulum counted below (``inner``) and beside (``step_count``) a ConditionalSkip of ``cond``."""
    from reap.envs.transforms import ConditionalSkip

    inner = reap.TransformedEnv(base or GymEnv("Pendulum-v1"), reap.StepCounter(step_count_key="inner"))
    return reap.TransformedEnv(inner, Compose(reap.StepCounter(), ConditionalSkip(cond)), auto_unwrap=False)


def test_conditional_skip_skips_the_base_env_and_its_own_transforms_as_torchrl():
    # the values TorchRL 0.14.1 gives for the same envs (its ConditionalSkip docstring's setup)
    from reap.envs.transforms import ConditionalSkip

    outer = reap.TransformedEnv(_skipping(lambda td: td["outer"] % 2 == 1), reap.StepCounter(step_count_key="outer"),
                                auto_unwrap=False)
    rollout = outer.rollout(10)
    assert rollout["next", "inner"].flatten().tolist() == [1, 1, 2, 2, 3, 3, 4, 4, 5, 5]
    assert rollout["next", "step_count"].flatten().tolist() == [1, 1, 2, 2, 3, 3, 4, 4, 5, 5]
    assert rollout["next", "outer"].flatten().tolist() == list(range(1, 11))  # above the skip: every step
    assert rollout["next", "reward"][1::2].eq(0).all() and rollout["next", "reward"][0::2].ne(0).all()
    assert rollout["next", "observation"][1].equal(rollout["observation"][1])  # a skipped step: the root's
    # a SerialEnv of skipping envs, and a collector over one (the TensorDict path): once skipped, a
    # step count of 2 stays 2 (the counter beside the skip is skipped too)
    serial = reap.SerialEnv(2, lambda: _skipping(lambda td: td["step_count"] % 3 == 2)).rollout(6)
    assert serial["next", "inner"][..., 0].tolist() == [[1, 2, 2, 2, 2, 2]] * 2
    with Collector(_skipping(lambda td: td["step_count"] % 3 == 2), None, frames_per_batch=6) as collector:
        assert collector.path == "tensordict" and "ConditionalSkip" in collector.path_reason
        assert next(iter(collector))["next", "inner"][..., 0].tolist() == [1, 2, 2, 2, 2, 2]
    with pytest.raises(TypeError, match="ConditionalSkip: cond must be a callable"):
        ConditionalSkip(3)
    with pytest.raises(NotImplementedError, match="ConditionalSkip acts on an env's steps only"):
        ConditionalSkip(lambda td: False)(TensorDict())


def test_conditional_skip_of_some_envs_steps_the_others_and_runs_the_transforms_on_all():
    # TorchRL's partial steps under a transform: the skipped env's rows are its root's, then the
    # transforms below the skip run on every row (inner counts each step, as TorchRL's)
    base = reap.SerialEnv(2, lambda: GymEnv("Pendulum-v1"))
    env = _skipping(lambda td: (td["step_count"].squeeze(-1) + torch.arange(2)) % 2 == 1, base)
    rollout = env.rollout(5)
    assert rollout["next", "inner"][..., 0].tolist() == [[1, 2, 3, 4, 5]] * 2
    stepped = rollout["next", "reward"][..., 0].ne(0)
    assert stepped.tolist() == [[True, False, True, False, True], [False, True, False, True, False]]
