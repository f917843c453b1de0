"""Gradients through batched envs: an env written the TorchRL way with a differentiable ``_step``,
batched by ``SerialEnv`` and wrapped in ``TransformedEnv``, passes the gradient from the rewards
back to the policy's weights, as TorchRL's ``SerialEnv`` does."""

import pytest
import torch
from tensordict import TensorDict
from tensordict.nn import TensorDictModule

import reap.envs
import reap.envs.transforms
import reap.specs


def make_linear_env_class(envs, specs):
    """obs' = obs + action, reward = -|obs'|^2: differentiable in the action (on ``envs.EnvBase``)."""

    class LinearEnv(envs.EnvBase):
        def __init__(self):
            super().__init__()
            self.observation_spec = specs.Composite(observation=specs.Unbounded((3,)))
            self.action_spec = specs.Unbounded((3,))
            self.reward_spec = specs.Unbounded((1,))

        def _reset(self, tensordict):
            return TensorDict({"observation": torch.ones(3)}, [])

        def _step(self, tensordict):
            obs = tensordict["observation"] + tensordict["action"]
            no = torch.zeros(1, dtype=torch.bool)
            return TensorDict({"observation": obs, "reward": -obs.pow(2).sum(-1, keepdim=True), "done": no,
                               "terminated": no}, [])

        def _set_seed(self, seed):
            pass

    return LinearEnv


def reference_loss_and_grad(steps: int, num_envs: int, max_steps: int | None = None):
    """The same rollout unrolled in plain torch: each episode restarts at ones after max_steps."""
    torch.manual_seed(0)
    linear = torch.nn.Linear(3, 3)
    obs, total = torch.ones(num_envs, 3), 0.0
    for t in range(steps):
        nxt = obs + linear(obs)
        total = total + (-nxt.pow(2).sum())
        obs = torch.ones(num_envs, 3) if max_steps and (t + 1) % max_steps == 0 else nxt
    total.backward()
    return total.detach(), linear.weight.grad


def rollout_loss_and_grad(env, steps: int, **kwargs):
    torch.manual_seed(0)
    policy = TensorDictModule(torch.nn.Linear(3, 3), in_keys=["observation"], out_keys=["action"])
    rollout = env.rollout(steps, policy, **kwargs)
    loss = rollout["next", "reward"].sum()
    loss.backward()
    env.close()
    return loss.detach(), policy.module.weight.grad


@pytest.mark.parametrize("wrap, max_steps", [
    (lambda env_cls: env_cls(), None),
    (lambda env_cls: reap.envs.SerialEnv(2, env_cls), None),
    (lambda env_cls: reap.envs.TransformedEnv(reap.envs.SerialEnv(2, env_cls), reap.envs.transforms.StepCounter()),
     None),
    (lambda env_cls: reap.envs.TransformedEnv(reap.envs.SerialEnv(2, env_cls),
                                              reap.envs.transforms.StepCounter(max_steps=2)), 2),
], ids=["env", "serial", "transformed-serial", "transformed-serial-resets"])
def test_the_gradient_reaches_the_policy_through_a_batched_env(wrap, max_steps):
    env = wrap(make_linear_env_class(reap.envs, reap.specs))
    num_envs = env.batch_size[0] if env.batch_size else 1
    loss, grad = rollout_loss_and_grad(env, 4, break_when_any_done=False)
    ref_loss, ref_grad = reference_loss_and_grad(4, num_envs, max_steps)
    torch.testing.assert_close(loss, ref_loss)
    torch.testing.assert_close(grad, ref_grad)


def test_a_step_without_grad_still_runs_on_the_step_arrays():
    env = reap.envs.SerialEnv(2, make_linear_env_class(reap.envs, reap.specs))
    td = env.reset()
    td["action"] = torch.ones(2, 3, requires_grad=True)
    with torch.no_grad():
        out = env.step(td)
    assert out["next", "observation"].grad_fn is None
    assert torch.equal(out["next", "observation"], torch.full((2, 3), 2.0))
    out = env.step(td.exclude("next"))
    assert out["next", "observation"].grad_fn is not None
    env.close()


@pytest.mark.parametrize("transformed", [False, True])
def test_gradients_match_torchrls_serial_env(transformed):
    torchrl_envs = pytest.importorskip("torchrl.envs")
    torchrl_data = pytest.importorskip("torchrl.data")
    results = []
    for envs, specs, transforms in [(torchrl_envs, torchrl_data, torchrl_envs.transforms),
                                    (reap.envs, reap.specs, reap.envs.transforms)]:
        env = envs.SerialEnv(2, make_linear_env_class(envs, specs))
        if transformed:
            env = envs.TransformedEnv(env, transforms.StepCounter(max_steps=3))
        results.append(rollout_loss_and_grad(env, 5, break_when_any_done=False))
    (torchrl_loss, torchrl_grad), (reap_loss, reap_grad) = results
    assert torch.equal(reap_loss, torchrl_loss) and torch.equal(reap_grad, torchrl_grad)
