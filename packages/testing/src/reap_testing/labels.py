"""``StepLabel``: a TorchRL-style transform that adds a non-tensor observation (a string), and
``labelled_env()``: CartPole with a step counter and that label, for the collectors' non-tensor
path. They live here so that worker processes import them.

Each step's ``"label"`` is ``"step <step_count>"``; a reset writes ``"reset"``.

Examples:
    >>> td = labelled_env().rollout(3)
    >>> list(td["label"]), list(td["next", "label"])
    (['reset', 'step 1', 'step 2'], ['step 1', 'step 2', 'step 3'])
"""

from __future__ import annotations

from tensordict import NonTensorData

from reap import GymEnv, StepCounter, Transform, TransformedEnv
from reap.specs import NonTensor


class StepLabel(Transform):
    """Writes ``"label"``: ``"reset"`` on reset, ``"step <step_count>"`` after each step."""

    def _call(self, next_tensordict):
        return next_tensordict.set("label", f"step {next_tensordict.get('step_count').item()}")

    def _reset(self, tensordict, tensordict_reset):
        return tensordict_reset.set("label", NonTensorData("reset"))

    def transform_observation_spec(self, observation_spec):
        observation_spec["label"] = NonTensor(shape=(), example_data="reset")
        return observation_spec


def labelled_env():
    """CartPole with ``StepCounter`` and :class:`StepLabel`."""
    return TransformedEnv(GymEnv("CartPole-v1"), StepCounter()).append_transform(StepLabel())


__all__ = ["StepLabel", "labelled_env"]
