"""Entries held by a tensorclass that grows each step (a chat log, as TorchRL's LLM envs keep
one): a ``Composite(data_cls=...)`` of strings with a -1 dim, written by a TorchRL-style
transform. check_env_specs, rollouts that reset, ConditionalSkip and the collectors keep each
step's own log (a reset once overwrote the done step's "next" log in place)."""

import torch
from tensordict import set_capture_non_tensor_stack, tensorclass

import reap
from reap.envs.transforms import ConditionalSkip
from reap.envs.utils import check_env_specs
from reap.specs import Composite, NonTensor
from reap_testing import CountingEnv


@tensorclass
class Line:
    speaker: str
    text: str


class Transcript(reap.Transform):
    """Keeps a log: two lines at reset, then one more per step whose text is the step number."""

    def transform_observation_spec(self, observation_spec):
        fields = {"speaker": NonTensor(example_data="x", shape=(-1,)), "text": NonTensor(example_data="x", shape=(-1,))}
        observation_spec["log"] = Composite(fields, shape=(-1,), data_cls=Line)
        return observation_spec

    def _reset(self, tensordict, tensordict_reset):
        with set_capture_non_tensor_stack(False):
            tensordict_reset["log"] = torch.stack([Line(speaker="env", text="0"), Line(speaker="env", text="1")])
        return tensordict_reset

    def _step(self, tensordict, next_tensordict):
        log = tensordict["log"]
        with set_capture_non_tensor_stack(False):
            line = Line(speaker="env", text=str(int(log.text[-1]) + 1))
            next_tensordict["log"] = torch.stack([*log.unbind(0), line])
        return next_tensordict


def logged(limit=4.0):
    return reap.TransformedEnv(CountingEnv(limit=limit), Transcript())


def one(td):
    return td.set("action", torch.ones(1))


def test_a_growing_tensorclass_entry_passes_check_env_specs_and_survives_resets():
    env = logged()
    check_env_specs(env)
    rollout = env.rollout(6, one, break_when_any_done=False)
    lengths = [len(step["next", "log"].text) for step in rollout.unbind(0)]
    assert lengths == [3, 4, 5, 6, 3, 4]  # done at the 4th step: its "next" keeps its own 6 lines
    assert list(rollout[3]["next", "log"].text) == ["0", "1", "2", "3", "4", "5"]
    assert list(rollout[4]["log"].text) == ["0", "1"]  # the root after the reset


def test_the_collector_and_a_skip_keep_each_steps_log():
    env = reap.TransformedEnv(logged(limit=3.0).append_transform(ConditionalSkip(lambda td: td["step_count"] % 3 == 2)),
                              reap.StepCounter(), auto_unwrap=False)
    with reap.Collector(env, one, frames_per_batch=8, total_frames=8) as collector:
        batch = next(iter(collector))
    lengths = [(len(step["log"].text), len(step["next", "log"].text)) for step in batch.unbind(0)]
    # a skipped step (every third) keeps the log; done at count 3 resets it to two lines
    assert lengths == [(2, 3), (3, 4), (4, 4), (4, 5), (2, 3), (3, 4), (4, 4), (4, 5)]
    assert batch["next", "done"].flatten().tolist() == [False, False, False, True, False, False, False, True]
