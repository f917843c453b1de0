"""``GymEnv`` with TorchRL's keywords: the same specs and rollouts as TorchRL's ``GymEnv``."""

import gymnasium as gym
import numpy as np
import pytest
import torch

from reap import Collector, GymEnv
from reap.envs import GymWrapper
from reap.specs import Bounded, Categorical, OneHot, Unbounded


class PixelEnv(gym.Env):
    """Moves a point; renders it as a small rgb_array frame (no pygame needed)."""

    metadata = {"render_modes": ["rgb_array"]}

    def __init__(self, render_mode=None):
        self.render_mode = render_mode
        self.observation_space = gym.spaces.Box(-1.0, 1.0, (2,), np.float32)
        self.action_space = gym.spaces.Discrete(3)

    def reset(self, *, seed=None, options=None):
        super().reset(seed=seed)
        self.pos, self.t = self.np_random.uniform(-1, 1, 2).astype(np.float32), 0
        return self.pos.copy(), {}

    def step(self, action):
        self.pos = np.clip(self.pos + (int(action) - 1) * 0.1, -1, 1).astype(np.float32)
        self.t += 1
        return self.pos.copy(), float(action), self.t >= 5, False, {}

    def render(self):
        frame = np.zeros((4, 6, 3), np.uint8)
        frame[..., 0], frame[..., 1] = int((self.pos[0] + 1) * 100), self.t
        return frame


class NoRendererEnv(PixelEnv):
    def render(self):
        raise gym.error.DependencyNotInstalled("pygame is not installed, run `pip install gymnasium[classic-control]`")


class NativeFrameskipEnv(PixelEnv):
    """An env with its own ``frameskip`` argument, as ALE's."""

    def __init__(self, render_mode=None, frameskip=4):
        super().__init__(render_mode)
        self.frameskip = frameskip


for _name, _cls in [("Pixels", PixelEnv), ("NoRenderer", NoRendererEnv), ("NativeFrameskip", NativeFrameskipEnv)]:
    gym.register(f"ReapTest/{_name}-v0", entry_point=_cls)


def rollouts(env_id, kwargs, steps=30):
    """reap's and TorchRL's GymEnv, seeded alike, under the same random actions."""
    torchrl_envs = pytest.importorskip("torchrl.envs")
    ours, theirs = GymEnv(env_id, **kwargs), torchrl_envs.GymEnv(env_id, **kwargs)
    torch.manual_seed(0)
    actions = [theirs.action_spec.rand() for _ in range(steps)]
    a = ours.rollout(steps, actions=actions, auto_reset=False, tensordict=ours.reset(seed=3),
                     break_when_any_done=False)
    b = theirs.rollout(steps, actions=actions, auto_reset=False, tensordict=theirs.reset(seed=3),
                       break_when_any_done=False)
    return ours, theirs, a, b


@pytest.mark.parametrize("env_id,kwargs", [
    ("CartPole-v1", {}),
    ("CartPole-v1", {"categorical_action_encoding": True}),
    ("CartPole-v1", {"frame_skip": 3}),
    ("FrozenLake-v1", {}),  # a Discrete observation is one-hot too
    ("Pendulum-v1", {"frame_skip": 2}),
    ("ReapTest/Pixels-v0", {"from_pixels": True}),
    ("ReapTest/Pixels-v0", {"from_pixels": True, "pixels_only": False, "frame_skip": 2}),
], ids=lambda x: str(x))
def test_specs_and_rollouts_match_torchrl(env_id, kwargs):
    ours, theirs, a, b = rollouts(env_id, kwargs)
    assert ours.action_spec == theirs.action_spec and ours.reward_spec == theirs.reward_spec
    assert ours.done_spec == theirs.done_spec
    assert list(ours.observation_spec.keys()) == list(theirs.observation_spec.keys())
    for key, spec in ours.observation_spec.items():
        if env_id == "CartPole-v1":  # a Box with some infinite bounds: Bounded with infinities in TorchRL
            assert isinstance(spec, Unbounded) and type(theirs.observation_spec[key]).__name__ == "BoundedContinuous"
        elif key == "pixels":  # a uint8 Box from 0 to 255: Unbounded in TorchRL
            assert isinstance(spec, Bounded) and type(theirs.observation_spec[key]).__name__ == "UnboundedDiscrete"
        else:
            assert spec == theirs.observation_spec[key], key
    assert set(a.keys(True, True)) == set(b.keys(True, True))
    for key in a.keys(True, True):
        x, y = a.get(key), b.get(key)
        assert (x.shape, x.dtype) == (y.shape, y.dtype) and torch.equal(x, y), key
    assert a["next", "done"].any() or env_id == "Pendulum-v1"  # the comparison crossed resets
    ours.close(), theirs.close()


@pytest.mark.parametrize("kwargs", [{}, {"categorical_action_encoding": True}, {"frame_skip": 2}])
def test_gym_wrapper_matches_torchrl_s(kwargs):
    torchrl_envs = pytest.importorskip("torchrl.envs")
    from reap.envs import GymWrapper

    ours, theirs = GymWrapper(gym.make("CartPole-v1"), **kwargs), torchrl_envs.GymWrapper(gym.make("CartPole-v1"),
                                                                                           **kwargs)
    assert ours.action_spec == theirs.action_spec and repr(ours).startswith("GymWrapper(env=<TimeLimit<")
    torch.manual_seed(0)
    actions = [theirs.action_spec.rand() for _ in range(30)]
    a, b = (env.rollout(30, actions=actions, auto_reset=False, tensordict=env.reset(seed=3), break_when_any_done=False)
            for env in (ours, theirs))
    assert set(a.keys(True, True)) == set(b.keys(True, True)) and a["next", "done"].any()
    for key in a.keys(True, True):
        assert torch.equal(a.get(key), b.get(key)), key
    with pytest.raises(TypeError, match=r"GymWrapper: env must be a gymnasium env instance .* use GymEnv\('CartPole"):
        GymWrapper("CartPole-v1")


def test_torchrl_s_class_attributes():
    from reap import StepCounter, TransformedEnv

    assert "CartPole-v1" in GymEnv.available_envs and GymEnv.lib is gym
    env = TransformedEnv(GymEnv("Pendulum-v1"), StepCounter())
    env.set_missing_tolerance(True)
    assert env.transform.missing_tolerance


def test_one_hot_actions_reach_a_vector_env_as_indices_in_one_buffer():
    class Recorder(gym.vector.VectorWrapper):
        def step(self, actions):
            self.seen.append((id(actions), actions.tolist()))
            return super().step(actions)

    vector = Recorder(gym.make_vec("CartPole-v1", num_envs=3, vectorization_mode="sync",
                                   vector_kwargs={"autoreset_mode": gym.vector.AutoresetMode.DISABLED}))
    vector.seen = []
    env = GymEnv(vector)
    assert env.action_spec == OneHot(2, shape=(3, 2), dtype=torch.int64)
    with Collector(env, None, frames_per_batch=30, total_frames=30) as collector:
        (batch,) = list(collector)
    assert len({buffer for buffer, _ in vector.seen}) == 1  # the same array every step
    assert [indices for _, indices in vector.seen] == batch["action"].argmax(-1).T.tolist()
    assert OneHot(2, dtype=torch.int64).is_in(batch["action"])


def test_frame_skip_repeats_the_action_until_done_and_sums_rewards():
    env = GymEnv("CartPole-v1", frame_skip=4, categorical_action_encoding=True)
    env.set_seed(1)  # resets with the seed (TorchRL's): the rollout's reset is the next episode
    td = env.rollout(10, actions=[torch.tensor(1)] * 10)  # stops at the first done
    ref = gym.make("CartPole-v1")
    ref.reset(seed=1)
    ref.reset()
    rewards, done = [], False
    while not done:
        total = 0.0
        for _ in range(4):
            _, reward, term, trunc, _ = ref.step(1)
            total += reward
            done = term or trunc
            if done:
                break
        rewards.append(total)
    assert td["next", "reward"].flatten().tolist() == rewards and rewards[-1] < 4.0


def test_native_frameskip_goes_to_the_env_as_torchrl_passes_it():
    assert GymEnv("ReapTest/NativeFrameskip-v0", frame_skip=3)._env.unwrapped.frameskip == 3
    assert GymEnv("ReapTest/NativeFrameskip-v0")._env.unwrapped.frameskip == 1  # TorchRL's default
    assert GymEnv("ReapTest/NativeFrameskip-v0", frameskip=2)._env.unwrapped.frameskip == 2
    with pytest.raises(ValueError, match="pass frame_skip or frameskip, not both"):
        GymEnv("ReapTest/NativeFrameskip-v0", frame_skip=3, frameskip=2)


def test_from_pixels_in_a_vector_env_and_the_accepted_torchrl_keywords():
    env = GymEnv("ReapTest/Pixels-v0", num_envs=2, from_pixels=True, pixels_only=False, batch_size=(2,),
                 device="cpu", allow_done_after_reset=True, convert_actions_to_numpy=True, num_workers=1,
                 backend="gymnasium", spec_locked=False, compile=False, auto_reset=False)
    assert list(env.observation_spec.keys()) == ["pixels", "observation"]
    env.set_seed(0)
    td = env.rollout(6, break_when_any_done=False)
    assert td["pixels"].shape == (2, 6, 4, 6, 3) and td["pixels"].dtype == torch.uint8
    step = td["next", "pixels"][..., 0, 0, 1]  # the frame's step counter, back to 1 after a reset
    assert step.tolist() == [[1, 2, 3, 4, 5, 1]] * 2
    assert repr(env) == "GymEnv(env=ReapTest/Pixels-v0, batch_size=torch.Size([2]), device=cpu)"
    assert GymEnv("CartPole-v1", batch_size=()).batch_size == ()
    instance = GymEnv(gym.make("ReapTest/Pixels-v0", render_mode="rgb_array"), from_pixels=True)
    assert list(instance.observation_spec.keys()) == ["pixels", "observation"]  # GymWrapper's pixels_only=False


@pytest.mark.parametrize("kwargs,error,match", [
    ({"frame_skip": 0}, ValueError, "frame_skip must be a positive int, got 0"),
    ({"frame_skip": 2.0}, ValueError, "frame_skip must be a positive int, got 2.0"),
    ({"backend": "gym"}, ValueError, r"backend='gym' is not supported; reap wraps gymnasium"),
    ({"convert_actions_to_numpy": False}, ValueError, r"convert_actions_to_numpy=False is not supported"),
    ({"native_autoreset": True}, ValueError, r"native_autoreset=True is not supported"),
    ({"batch_size": (3,)}, ValueError, r"batch_size=\(3,\) differs from the env's batch \(\); num_envs sets"),
    ({"auto_reset": True}, ValueError, r"auto_reset=True is not supported \(reap's rollout\(\) and collectors reset"),
    ({"compile": True}, ValueError, r"compile=True is not supported \(gymnasium steps outside torch; compile the "
                                    r"policy \(compile_with_warmup\)\); leave compile out"),
])
def test_keywords_reap_cannot_honour_are_refused_with_the_fix(kwargs, error, match):
    with pytest.raises(error, match=match):
        GymEnv("CartPole-v1", **kwargs)


def test_from_pixels_without_a_renderer_is_a_clear_error():
    with pytest.raises(RuntimeError, match=r"from_pixels=True, but ReapTest/NoRenderer-v0 cannot render rgb_array "
                                           r"frames: pygame is not installed"):
        GymEnv("ReapTest/NoRenderer-v0", from_pixels=True)
    with pytest.raises(ValueError, match=r"from_pixels=True needs render_mode='rgb_array', got render_mode='human'"):
        GymEnv("ReapTest/Pixels-v0", from_pixels=True, render_mode="human")
    with pytest.raises(ValueError, match=r"from_pixels=True needs render_mode='rgb_array', got render_mode=None"):
        GymEnv(gym.make("ReapTest/Pixels-v0"), from_pixels=True)
    with pytest.raises(ValueError, match=r"\['max_episode_steps'\] go to gymnasium.make"):
        GymEnv(gym.make("CartPole-v1"), max_episode_steps=5)


def test_categorical_encoding_keeps_index_actions():
    env = GymEnv("CartPole-v1", num_envs=2, categorical_action_encoding=True)
    assert env.action_spec == Categorical(2, shape=(2,))
    with Collector(env, None, frames_per_batch=8, total_frames=8) as collector:
        (batch,) = list(collector)
    assert batch["action"].shape == (2, 4) and Categorical(2).is_in(batch["action"])


def test_set_gym_backend_takes_gymnasium_in_every_form_and_refuses_gym():
    from reap.envs.libs.gym import gym_backend, set_gym_backend

    @set_gym_backend(lambda: gym)
    def make():
        return GymEnv("CartPole-v1")

    assert make().action_spec.shape == (2,)
    with set_gym_backend(gym) as chosen:
        assert chosen.backend is gym and gym_backend() is gym and gym_backend("spaces") is gym.spaces
    with pytest.raises(ValueError, match=r"gymnasium only, got backend='gym'; use set_gym_backend\(\"gymnasium\"\)"):
        set_gym_backend("gym")


def test_run_type_checks_is_taken_and_passes_by_construction():
    env = GymEnv("CartPole-v1", run_type_checks=True)
    assert env.run_type_checks and not GymEnv("CartPole-v1").run_type_checks
    assert env.rollout(3)["next", "done"].dtype == torch.bool


class SquaresEnv(gym.Env):
    """Counts up by one a step, done at 4; its info holds the observation squared (at reset too)."""

    def __init__(self):
        self.observation_space = gym.spaces.Box(-np.inf, np.inf, (3,), np.float32)
        self.action_space = gym.spaces.Box(-1.0, 1.0, (1,), np.float32)

    def reset(self, *, seed=None, options=None):
        self.state = np.zeros(3, np.float32)
        return self.state.copy(), {"square": self.state ** 2}

    def step(self, action):
        self.state = self.state + 1
        done = bool(self.state[0] == 4)
        return self.state.copy(), float(done), done, False, {"square": self.state ** 2}


def test_gym_wrapper_takes_a_same_step_vector_env_as_a_disabled_one():
    # TorchRL's: a SAME_STEP vector env's final observation is ("next", "observation") and the
    # observation it reset to starts the next step; its info entries are read as observations
    modes = gym.vector.AutoresetMode
    out = {}
    for mode in (modes.DISABLED, modes.SAME_STEP):
        venv = gym.make_vec("CartPole-v1", num_envs=3, vectorization_mode="sync", vector_kwargs={"autoreset_mode": mode})
        env = GymWrapper(venv, categorical_action_encoding=True)
        venv.reset(seed=0)
        td, steps = env.reset(), []
        for i in range(60):
            td["action"] = torch.tensor([i % 2, (i // 3) % 2, 1])
            step, td = env.step_and_maybe_reset(td)
            steps.append(step)
        out[mode] = torch.stack(steps, -1)
        env.close()
    disabled, same_step = out[modes.DISABLED], out[modes.SAME_STEP]
    assert disabled["next", "done"].sum() >= 6  # several resets, in each sub-env
    for key in ("observation", ("next", "observation"), ("next", "reward"), ("next", "done")):
        assert torch.equal(disabled[key], same_step[key]), key
    venv = gym.vector.SyncVectorEnv([SquaresEnv] * 2, autoreset_mode=modes.SAME_STEP)
    rollout = GymWrapper(venv).rollout(9, break_when_any_done=False)
    assert rollout["next", "observation"][0, :, 0].tolist() == [1, 2, 3, 4, 1, 2, 3, 4, 1]
    assert rollout["observation"][0, :, 0].tolist() == [0, 1, 2, 3, 0, 1, 2, 3, 0]
    assert torch.equal(rollout["square"], rollout["observation"] ** 2)
    assert torch.equal(rollout["next", "square"], rollout["next", "observation"] ** 2)  # the final info's
    with pytest.raises(ValueError, match=r"autoreset_mode=AutoresetMode.NEXT_STEP steps a finished sub-env's reset "
                                         r"in place of its next action; build it with .*DISABLED.* or "
                                         r"AutoresetMode.SAME_STEP"):
        GymWrapper(gym.vector.SyncVectorEnv([SquaresEnv] * 2))


class DictActionEnv(gym.Env):
    """Takes a Dict action (a Discrete and a Box); its observation is the last action's sum."""

    def __init__(self):
        self.action_space = gym.spaces.Dict(push=gym.spaces.Discrete(3), force=gym.spaces.Box(-1, 1, (2,)))
        self.observation_space = gym.spaces.Box(-np.inf, np.inf, (1,), np.float32)

    def reset(self, *, seed=None, options=None):
        super().reset(seed=seed)
        return np.zeros(1, np.float32), {}

    def step(self, action):
        assert isinstance(action["push"], np.ndarray) and isinstance(action["force"], np.ndarray), action
        total = int(action["push"]) + float(action["force"].sum())
        return np.array([total], np.float32), 0.0, False, False, {}


@pytest.mark.parametrize("categorical", [False, True])
def test_a_dict_action_space_is_one_action_key_per_entry(categorical):
    # TorchRL's: a Composite action spec, an action key per entry, gathered into a dict for gym.step
    env = GymWrapper(DictActionEnv(), categorical_action_encoding=categorical)
    assert env.action_keys == ["force", "push"]  # gymnasium's Dict sorts its keys
    push = Categorical(3, shape=(), dtype=torch.int64) if categorical else OneHot(3, shape=(3,), dtype=torch.int64)
    assert env.action_spec["push"] == push
    assert env.action_spec["force"] == Bounded(-1.0, 1.0, shape=(2,), dtype=torch.float32)
    rollout = env.rollout(6)
    index = rollout["push"] if categorical else rollout["push"].argmax(-1)
    expected = index.float() + rollout["force"].sum(-1)
    assert torch.allclose(rollout["next", "observation"][:, 0], expected)
    nested = DictActionEnv()
    nested.action_space = gym.spaces.Dict(inner=nested.action_space)
    with pytest.raises(TypeError, match="a Dict action space nested in a Dict is not supported"):
        GymWrapper(nested)


def test_num_envs_zero_is_a_single_env_and_the_library_is_named():
    # TorchRL's default num_envs=0; get_library_name says which gym library an env comes from
    assert GymEnv("CartPole-v1", num_envs=0).batch_size == ()
    with pytest.raises(ValueError, match="num_envs must be a non-negative int or None, got -1"):
        GymEnv("CartPole-v1", num_envs=-1)
    assert GymEnv.get_library_name(gym.make("CartPole-v1")) == "gymnasium"
    with pytest.raises(TypeError, match="is not a gymnasium env"):
        GymEnv.get_library_name(object())
    with pytest.raises(ValueError, match=r"num_workers=2 is not supported \(GymWrapper wraps one env instance; "
                                         r"GymEnv\(env_id, num_workers=n\) runs n processes\)"):
        GymWrapper(gym.make("CartPole-v1"), num_workers=2)
    for bad in (0, -1, 2.0, True):
        with pytest.raises(ValueError, match=f"GymEnv: num_workers must be a positive int, got {bad!r}"):
            GymEnv("CartPole-v1", num_workers=bad)
