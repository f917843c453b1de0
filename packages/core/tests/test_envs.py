import gymnasium as gym
import numpy as np
import pytest
import torch

from reap import GymEnv, RewardSum, SerialEnv, StepCounter, TransformedEnv
from reap.specs import Bounded, Categorical, OneHot
from reap_testing import CountingEnv


def test_unknown_env_id_names_the_argument_and_suggests():
    with pytest.raises(ValueError, match=r"env_name 'CartPol-v1' is not a registered.*CartPole-v1"):
        GymEnv("CartPol-v1")


@pytest.mark.parametrize("num_envs", [-1, 2.5, True])
def test_bad_num_envs(num_envs):
    with pytest.raises(ValueError, match="num_envs must be a non-negative int or None"):
        GymEnv("CartPole-v1", num_envs=num_envs)


def test_specs_follow_gymnasium_spaces():
    env = GymEnv("Pendulum-v1", num_envs=3)
    assert isinstance(env.action_spec, Bounded)
    assert env.action_spec.shape == (3, 1)
    assert torch.equal(env.action_spec.high, torch.full((3, 1), 2.0))
    assert env.observation_spec["observation"].shape == (3, 3)
    cart = GymEnv("CartPole-v1")  # one-hot, as TorchRL's default
    assert cart.action_spec == OneHot(2, shape=(2,), dtype=torch.int64)
    indices = GymEnv("CartPole-v1", categorical_action_encoding=True)
    assert isinstance(indices.action_spec, Categorical) and indices.action_spec.n == 2
    assert indices.action_spec.shape == ()
    env.close(), cart.close(), indices.close()


def test_single_env_matches_gymnasium_step_for_step():
    env = GymEnv("CartPole-v1")
    env.set_seed(3)
    td = env.reset()
    ref = gym.make("CartPole-v1")
    ref.reset(seed=3)  # TorchRL's set_seed resets with the seed: the next reset is the episode after
    obs, _ = ref.reset()
    np.testing.assert_array_equal(td["observation"].numpy(), obs)
    for action in [0, 1, 1, 0, 1]:
        td["action"] = torch.nn.functional.one_hot(torch.tensor(action), 2)
        out = env.step(td)["next"]
        obs, reward, term, trunc, _ = ref.step(action)
        np.testing.assert_array_equal(out["observation"].numpy(), obs)
        assert out["reward"].item() == reward and out["terminated"].item() == term
        assert out["truncated"].item() == trunc and out["done"].item() == (term or trunc)
        td = td.exclude("next").update({"observation": out["observation"]})


def test_vector_env_keeps_true_final_observation_and_resets_only_finished():
    # CartPole under a constant action terminates within a few dozen steps.
    env = GymEnv("CartPole-v1", num_envs=2)
    env.set_seed(0)
    td = env.rollout(60, policy=lambda t: t.set("action", torch.tensor([[0, 1], [0, 1]])),
                     break_when_any_done=False)
    done = td["next", "done"].squeeze(-1)
    assert done.any()
    b, t = done.nonzero()[0].tolist()
    final = td["next", "observation"][b, t]
    # The episode ended because the pole fell or the cart left: the final obs shows it.
    assert abs(final[2]) > 0.2095 or abs(final[0]) > 2.4
    # The next root observation is a fresh reset (small values), not the final one.
    assert td["observation"][b, t + 1].abs().max() <= 0.05
    # Terminated and truncated are kept apart.
    assert torch.equal(td["next", "terminated"][b, t], torch.tensor([True]))
    assert not td["next", "truncated"].any()
    env.close()


def test_custom_env_rollout_and_termination():
    env = CountingEnv(limit=3.0)
    policy = lambda td: td.set("action", torch.ones(1))  # noqa: E731
    td = env.rollout(10, policy=policy)
    assert td.shape == (3,)
    assert td["next", "observation"].flatten().tolist() == [1.0, 2.0, 3.0]
    assert td["next", "done"].flatten().tolist() == [False, False, True]


def test_serial_env_batches_and_resets_each_sub_env():
    env = SerialEnv(2, [lambda: CountingEnv(limit=2.0), lambda: CountingEnv(limit=3.0)])
    assert env.batch_size == (2,)
    policy = lambda td: td.set("action", torch.ones(2, 1))  # noqa: E731
    td = env.rollout(6, policy=policy, break_when_any_done=False)
    assert td.shape == (2, 6)
    assert td["next", "observation"][0].flatten().tolist() == [1, 2, 1, 2, 1, 2]
    assert td["next", "observation"][1].flatten().tolist() == [1, 2, 3, 1, 2, 3]


def test_serial_env_forwards_attribute_chains_and_starts_again_at_reset():
    env = SerialEnv(2, [lambda: CountingEnv(limit=2.0), lambda: CountingEnv(limit=3.5)])
    assert env.limit.real == [2.0, 3.5] and env.limit.is_integer() == [True, False]
    with pytest.raises(AttributeError, match="no attribute 'limit.nothing', nor have its sub-envs"):
        _ = env.limit.nothing
    first = env.envs
    env.close()
    assert env.is_closed and all(sub.is_closed for sub in first)
    td = env.reset()  # TorchRL's: a closed batched env starts again at reset, with new sub-envs
    assert not env.is_closed and td["observation"].shape == (2, 1)
    assert not any(new is old for new, old in zip(env.envs, first))
    second = env.envs
    env.start()  # running: TorchRL's start() does nothing
    assert env.envs is second
    env.close()
    env.start()
    assert not env.is_closed and env.envs is not second


def test_serial_env_rejects_mismatched_envs():
    with pytest.raises(ValueError, match="same batch size and keys"):
        SerialEnv(2, [lambda: GymEnv("CartPole-v1"), lambda: GymEnv("Pendulum-v1")])
    for error in (ValueError, RuntimeError):  # TorchRL raises a RuntimeError there
        with pytest.raises(error, match=r"SerialEnv: len\(create_env_fn\) and num_workers mismatch: create_env_fn has 2 "
                                        r"callables but num_workers=3"):
            SerialEnv(3, [lambda: GymEnv("CartPole-v1")] * 2)


def test_rand_action_is_in_spec():
    env = GymEnv("Pendulum-v1", num_envs=4)
    td = env.rand_action()
    assert env.action_spec.is_in(td["action"])
    env.close()


def test_gym_env_refuses_non_cpu_device():
    with pytest.raises(ValueError, match="device='cuda'"):
        GymEnv("CartPole-v1", device="cuda")


def test_vector_instance_with_autoreset_is_refused():
    venv = gym.make_vec("CartPole-v1", num_envs=2, vectorization_mode="sync")
    with pytest.raises(ValueError, match="autoreset_mode"):
        GymEnv(venv)
    venv.close()


def test_serial_env_takes_torchrl_s_keywords():
    env = SerialEnv(2, lambda: GymEnv("CartPole-v1"), shared_memory=False, num_threads=2, use_buffers=True,
                    device="cpu", policy_proof=None)
    assert env.batch_size == (2,) and env.done_keys == ["done", "terminated", "truncated"]
    assert env.action_spec == OneHot(2, shape=(2, 2), dtype=torch.int64)
    with pytest.raises(ValueError, match=r"SerialEnv: allow_step_when_done=True is not supported \(reap's envs are "
                                         r"reset when done; leave it out\)"):
        SerialEnv(2, lambda: GymEnv("CartPole-v1"), allow_step_when_done=True)
    with pytest.raises(TypeError, match=r"SerialEnv got unexpected keyword arguments \['num_envs'\]"):
        SerialEnv(2, lambda: GymEnv("CartPole-v1"), num_envs=2)
    with pytest.raises(ValueError, match="SerialEnv: device='meta' is not supported"):
        SerialEnv(2, lambda: GymEnv("CartPole-v1"), device="meta")


def test_env_creator_keywords_follow_torchrl():
    from reap import EnvCreator

    seen = []

    def make(**kwargs):
        seen.append(kwargs)
        return CountingEnv()

    creator = EnvCreator(make, {"limit": 1.0}, share_memory=False, other=2)
    assert creator.create_env_kwargs == {"other": 2, "limit": 1.0} and not creator.initialized
    creator(limit=5.0, extra=3)
    assert seen[-1] == {"limit": 1.0, "extra": 3, "other": 2}  # the creator's keywords win, as in TorchRL
    variant = creator.make_variant(limit=2.0)
    variant()
    assert seen[-1]["limit"] == 2.0 and creator.create_env_kwargs["limit"] == 1.0
    assert creator.init_() is creator and creator.initialized and creator.full_action_spec["action"].shape == (1,)
    with pytest.raises(TypeError, match="create_env_kwargs must be a dict of keyword arguments"):
        EnvCreator(make, [1])


def test_env_creator_of_a_lambda_goes_to_a_spawned_process(tmp_path):
    # TorchRL's EnvCreator pickles a lambda or a local function by value; plain pickle cannot
    import multiprocessing
    import pathlib

    from reap import EnvCreator

    marker = str(tmp_path / "built")
    make = EnvCreator(lambda: (pathlib.Path(marker).write_text("built"), GymEnv("Pendulum-v1"))[1])
    child = multiprocessing.get_context("spawn").Process(target=make)  # the child builds the env
    child.start()
    child.join(120)
    assert child.exitcode == 0 and pathlib.Path(marker).read_text() == "built"


def test_reset_takes_a_seed_and_close_takes_torchrl_s_keyword():
    env = GymEnv("CartPole-v1")
    first, again = env.reset(seed=3)["observation"], env.reset(seed=3)["observation"]
    expected, _ = gym.make("CartPole-v1").reset(seed=3)
    np.testing.assert_array_equal(first.numpy(), expected)
    assert torch.equal(first, again) and not torch.equal(first, env.reset()["observation"])
    # through transforms too (TorchRL's TransformedEnv passes the seed on to the base env's reset)
    transformed = TransformedEnv(TransformedEnv(GymEnv("CartPole-v1"), StepCounter()), RewardSum())
    assert torch.equal(transformed.reset(seed=3)["observation"], first)
    with pytest.raises(TypeError, match=r"GymEnv.reset got unexpected keyword arguments \['options'\]"):
        env.reset(options={})
    env.close(raise_if_closed=False)
    serial = SerialEnv(2, lambda: GymEnv("CartPole-v1"))
    serial.close(raise_if_closed=False)
    assert env.is_closed and serial.is_closed and all(e.is_closed for e in serial.envs)


def test_torchrl_s_other_env_methods():
    env = CountingEnv()
    single = CountingEnv.make_parallel(lambda: GymEnv("CartPole-v1"), num_envs=1, serial_for_single=True)
    assert isinstance(single, SerialEnv) and single.batch_size == (1,)
    with pytest.raises(NotImplementedError, match="compile the policy instead"):
        env.compile()
    assert env.eager() is env and env.collector is None

    class Driver:
        pass

    driver = Driver()
    env.register_collector(driver)
    assert env.collector is driver


def test_auto_specs_describes_a_non_tensor_observation():
    from tensordict import TensorDict

    from reap.envs import EnvBase
    from reap.specs import Composite, Unbounded

    class WithMeta(EnvBase):
        def _reset(self, td):
            out = TensorDict(obs=torch.zeros(3)).update(self.full_done_spec.zero())
            out.set_non_tensor("meta", "start")
            return out

        def _step(self, td):
            out = TensorDict(obs=td["obs"] + 1, reward=torch.zeros(1)).update(self.full_done_spec.zero())
            out.set_non_tensor("meta", "step")
            return out

        def _set_seed(self, seed):
            pass

    env = WithMeta()
    env.full_action_spec = Composite(action=Unbounded((1,)))
    env.auto_specs_(lambda td: td.set("action", torch.zeros(1)), observation_key=["obs", "meta"])
    from reap.specs import NonTensor

    assert isinstance(env.observation_spec["meta"], NonTensor) and env.observation_spec["obs"].shape == (3,)
    assert env.rollout(2)["next", "meta"] == ["step", "step"]


def test_outputs_are_on_the_env_s_device_as_torchrls():
    from reap import StepCounter, TransformedEnv

    for make in (lambda d: GymEnv("Pendulum-v1", device=d), lambda d: TransformedEnv(GymEnv("Pendulum-v1", device=d),
                                                                                     StepCounter())):
        assert make(None).rollout(2).device is None
        env = make("cpu")
        assert env.reset().device == env.rollout(2).device == torch.device("cpu")


def test_env_creator_meta_data_as_torchrl():
    import pickle

    from reap import EnvCreator, StepCounter, TransformedEnv
    from reap.envs.env_creator import EnvMetaData

    creator = EnvCreator(lambda: TransformedEnv(GymEnv("Pendulum-v1"), StepCounter()))
    meta = creator.meta_data
    assert isinstance(meta, EnvMetaData) and creator.initialized
    assert (meta.batch_size, meta.device, meta.batch_locked, meta.supports_set_state, meta.has_dynamic_specs) == (
        torch.Size([]), None, True, False, False)
    assert meta.specs["input_spec", "full_action_spec", "action"] == creator.action_spec
    assert meta.tensordict["_reset"].dtype == torch.bool and meta.tensordict["next", "step_count"].shape == (1,)
    assert meta.expand(3).batch_size == (3,) and meta.expand(3).specs.shape == (3,) and meta.expand(3)[0].batch_size == ()
    assert pickle.loads(pickle.dumps(EnvCreator(GymEnv, env_name="CartPole-v1").init_())).meta_data.batch_size == ()
    with pytest.raises(TypeError, match="EnvCreator.meta_data must be an EnvMetaData, got dict"):
        creator.meta_data = {}
    torchrl_envs = pytest.importorskip("torchrl.envs")
    theirs = torchrl_envs.EnvCreator(
        lambda: torchrl_envs.TransformedEnv(torchrl_envs.GymEnv("Pendulum-v1"), torchrl_envs.StepCounter())).meta_data
    assert sorted(map(str, meta.tensordict.keys(True, True))) == sorted(map(str, theirs.tensordict.keys(True, True)))
    assert meta.device_map == theirs.device_map
    for key in meta.tensordict.keys(True, True):
        assert meta.tensordict[key].dtype == theirs.tensordict[key].dtype, key
    assert repr(meta.specs["input_spec", "full_action_spec"]) == repr(
        theirs.specs["input_spec", "full_action_spec"]).replace("torchrl", "reap")


def test_set_seed_chains_the_sub_envs_seeds_as_torchrl():
    """TorchRL's seed chain: each env returns ``seed_generator(seed)`` for the next; a SerialEnv
    seeds its sub-envs along it and returns the last one's next seed."""
    from reap import SerialEnv
    from reap._utils import seed_generator

    assert GymEnv("CartPole-v1").set_seed(100) == seed_generator(100) == 3286701209  # torchrl._utils' value
    assert GymEnv("CartPole-v1").set_seed(100, static_seed=True) == 100
    env = SerialEnv(2, lambda: GymEnv("CartPole-v1"))
    assert env.set_seed(100) == seed_generator(seed_generator(100))
    first = env.reset()["observation"]
    for i, seed in enumerate([100, seed_generator(100)]):
        ref = gym.make("CartPole-v1")
        ref.reset(seed=seed)
        np.testing.assert_array_equal(first[i].numpy(), ref.reset()[0])


def test_seeded_resets_equal_torchrls():
    pytest.importorskip("torchrl")
    from torchrl.envs import GymEnv as TorchRLGymEnv
    from torchrl.envs import SerialEnv as TorchRLSerialEnv

    from reap import SerialEnv

    for ours, theirs in [(GymEnv("CartPole-v1"), TorchRLGymEnv("CartPole-v1")),
                         (GymEnv("CartPole-v1", num_envs=3), TorchRLGymEnv("CartPole-v1", num_envs=3)),
                         (SerialEnv(2, lambda: GymEnv("CartPole-v1")),
                          TorchRLSerialEnv(2, lambda: TorchRLGymEnv("CartPole-v1")))]:
        assert ours.set_seed(7) == theirs.set_seed(7)
        assert torch.equal(ours.reset()["observation"], theirs.reset()["observation"])
