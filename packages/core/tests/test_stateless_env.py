"""A batch-unlocked (stateless) env as TorchRL's custom-env tutorial writes it: a pendulum whose
state and parameters come in the input, so one env steps any batch of them (``batch_locked =
False``). reap runs it as TorchRL does: batched resets, random steps and rollouts, transforms
(the tutorial's own ``_apply_to_composite`` ones), gradients through the rollout; against
TorchRL's values where TorchRL is installed."""

import math

import pytest
import torch
from tensordict import TensorDict
from tensordict.nn import TensorDictModule

import reap
from reap.envs.utils import check_env_specs
from reap.specs import Bounded, Composite, Unbounded


def make_classes(lib):
    """The tutorial's env and transforms on ``lib`` (reap's or TorchRL's modules)."""
    envs, specs = lib["envs"], lib["specs"]

    class Pendulum(envs.EnvBase):
        batch_locked = False

        def __init__(self, seed=0):
            super().__init__()
            params = self.gen_params()["params"]
            self.observation_spec = specs.Composite(
                th=specs.Bounded(-math.pi, math.pi, shape=()), thdot=specs.Bounded(-8.0, 8.0, shape=()),
                params=specs.Composite({k: specs.Unbounded(shape=(), dtype=v.dtype) for k, v in params.items()}))
            self.state_spec = self.observation_spec.clone()
            self.action_spec = specs.Bounded(-2.0, 2.0, shape=(1,))
            self.reward_spec = specs.Unbounded(shape=(1,))
            self.set_seed(seed)

        @staticmethod
        def gen_params(g=10.0, batch_size=None):
            td = TensorDict(params=TensorDict(max_speed=8.0, max_torque=2.0, dt=0.05, g=g, m=1.0, l=1.0))
            return td.expand(batch_size).contiguous() if batch_size else td

        def _reset(self, tensordict):
            if tensordict is None or tensordict.is_empty():
                tensordict = self.gen_params(batch_size=self.batch_size)
            th = torch.rand(tensordict.shape, generator=self.rng) * 2 * math.pi - math.pi
            thdot = torch.rand(tensordict.shape, generator=self.rng) * 2 - 1
            return TensorDict(th=th, thdot=thdot, params=tensordict["params"], batch_size=tensordict.shape)

        @staticmethod
        def _step(tensordict):
            th, thdot, p = tensordict["th"], tensordict["thdot"], tensordict["params"]
            u = tensordict["action"].squeeze(-1).clamp(-p["max_torque"], p["max_torque"])
            cost = (((th + math.pi) % (2 * math.pi)) - math.pi) ** 2 + 0.1 * thdot**2 + 0.001 * u**2
            thdot = (thdot + (3 * p["g"] / (2 * p["l"]) * th.sin() + 3.0 / (p["m"] * p["l"] ** 2) * u) * p["dt"])
            thdot = thdot.clamp(-p["max_speed"], p["max_speed"])
            reward = -cost.view(*tensordict.shape, 1)
            return TensorDict(th=th + thdot * p["dt"], thdot=thdot, params=p, reward=reward,
                              done=torch.zeros_like(reward, dtype=torch.bool), batch_size=tensordict.shape)

        def _set_seed(self, seed):
            self.rng = torch.Generator().manual_seed(seed)

    class SinTransform(envs.Transform):
        def _apply_transform(self, obs):
            return obs.sin()

        def _reset(self, tensordict, tensordict_reset):
            return self._call(tensordict_reset)

        @lib["apply_to_composite"]
        def transform_observation_spec(self, observation_spec):
            return specs.Bounded(-1.0, 1.0, shape=observation_spec.shape, dtype=observation_spec.dtype)

    class CosTransform(SinTransform):
        def _apply_transform(self, obs):
            return obs.cos()

    def transformed(env):
        env = envs.TransformedEnv(env, envs.UnsqueezeTransform(dim=-1, in_keys=["th", "thdot"],
                                                               in_keys_inv=["th", "thdot"]))
        env.append_transform(SinTransform(in_keys=["th"], out_keys=["sin"]))
        env.append_transform(CosTransform(in_keys=["th"], out_keys=["cos"]))
        return env.append_transform(envs.CatTensors(in_keys=["sin", "cos", "thdot"], dim=-1, out_key="observation",
                                                    del_keys=False))

    return Pendulum, transformed


def reap_lib():
    from reap.envs.transforms.transforms import (
        _apply_to_composite,  # TorchRL's path, as the tutorial imports it
    )

    return {"envs": reap.envs, "specs": reap.specs, "apply_to_composite": _apply_to_composite}


def rollout_with_policy(lib):
    Pendulum, transformed = make_classes(lib)
    torch.manual_seed(0)
    net = torch.nn.Sequential(torch.nn.Linear(3, 8), torch.nn.Tanh(), torch.nn.Linear(8, 1))
    env = transformed(Pendulum(seed=0))
    check_env_specs(env) if lib["envs"] is reap.envs else lib["check_env_specs"](env)
    start = env.reset(env.gen_params(batch_size=[4]))
    rollout = env.rollout(20, TensorDictModule(net, in_keys=["observation"], out_keys=["action"]), tensordict=start,
                          auto_reset=False)
    rollout["next", "reward"].mean().backward()
    return rollout, net[0].weight.grad


def test_a_stateless_env_steps_any_batch_of_inputs():
    Pendulum, _ = make_classes(reap_lib())
    env = Pendulum()
    assert not env.batch_locked and env.batch_size == ()
    check_env_specs(env)
    start = env.reset(env.gen_params(batch_size=[10]))
    assert start.batch_size == (10,) and start["params", "g"].shape == (10,)
    assert env.rand_step(start.clone())["next", "th"].shape == (10,)
    rollout = env.rollout(3, tensordict=start, auto_reset=False)
    assert rollout.batch_size == (10, 3) and rollout.names == [None, "time"]
    # stateless: each row of the batch is the rollout of that row alone
    actions = torch.linspace(-2, 2, 10).view(10, 1)
    whole = env.rollout(3, lambda td: td.set("action", actions), tensordict=start.clone(), auto_reset=False)
    row = env.rollout(3, lambda td: td.set("action", actions[3]), tensordict=start[3].clone(), auto_reset=False)
    assert torch.allclose(whole[3]["next", "th"], row["next", "th"])
    assert env.rollout(3).batch_size == (3,)  # its own batch size, (), as well
    with reap.Collector(Pendulum(), None, frames_per_batch=8, total_frames=8) as collector:
        assert next(iter(collector)).batch_size == (8,)


def test_the_tutorial_transforms_and_gradients_through_a_batched_rollout():
    rollout, grad = rollout_with_policy(reap_lib())
    assert rollout.batch_size == (4, 20) and rollout["next", "observation"].shape == (4, 20, 3)
    sin = rollout["next", "observation"][..., 1]  # CatTensors sorts its in_keys: cos, sin, thdot
    assert sin.eq(rollout["next", "th"].squeeze(-1).sin()).all()
    assert grad is not None and grad.abs().sum() > 0


def test_the_tutorial_gives_torchrl_values_and_gradients():
    torchrl_envs = pytest.importorskip("torchrl.envs")
    import torchrl.data
    from torchrl.envs.transforms.transforms import _apply_to_composite
    from torchrl.envs.utils import check_env_specs as torchrl_check

    rollout, grad = rollout_with_policy(reap_lib())
    want, want_grad = rollout_with_policy({"envs": torchrl_envs, "specs": torchrl.data,
                                           "apply_to_composite": _apply_to_composite, "check_env_specs": torchrl_check})
    assert torch.equal(rollout["next", "reward"], want["next", "reward"])
    assert torch.equal(rollout["next", "observation"], want["next", "observation"])
    assert torch.allclose(grad, want_grad)


def test_only_envs_written_the_torchrl_way_can_be_batch_unlocked():
    from reap_testing import CountingEnv, EchoEnv

    class Unlocked(EchoEnv):
        batch_locked = False

    with pytest.raises(ValueError, match="Unlocked: only an env written the TorchRL way .* can be batch-unlocked"):
        Unlocked()
    with pytest.raises(RuntimeError, match="Expected a tensordict with shape==env.batch_size"):
        CountingEnv().reset(TensorDict(batch_size=[3]))  # a locked env still checks its batch
    unlocked = CountingEnv.__new__(CountingEnv, _batch_locked=False)  # TorchRL's keyword, as its __new__ passes it
    unlocked.__init__()
    assert not unlocked.batch_locked


def test_specs_imports_match_the_tutorial():
    # the names the tutorial uses, at the paths it imports them from (rewritten to reap)
    from reap.data import Bounded as B
    from reap.data import Composite as C
    from reap.data import Unbounded as U
    from reap.envs.transforms.transforms import Transform, TransformedEnv, UnsqueezeTransform  # noqa: F401

    assert (B, C, U) == (Bounded, Composite, Unbounded)
