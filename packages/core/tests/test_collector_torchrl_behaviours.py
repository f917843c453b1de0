"""Collector behaviours TorchRL users rely on: shutdown closes the env, ``max_frames_per_traj``
adds ``step_count``, ``len(collector)``, a user-held ``VanillaWeightUpdater`` pushes or raises."""

import warnings

import pytest
import torch
from tensordict import NonTensorStack, TensorDict
from tensordict.nn import TensorDictModule, TensorDictSequential

from reap import (
    Collector,
    Composite,
    EnvBase,
    GymEnv,
    StepCounter,
    TransformedEnv,
    Unbounded,
    VanillaWeightUpdater,
)
from reap._utils import seed_generator
from reap.collectors.base import NoLengthError


def _policy():
    torch.manual_seed(0)
    return TensorDictModule(torch.nn.Linear(3, 1), in_keys=["observation"], out_keys=["action"])


def test_shutdown_closes_an_env_passed_as_instance():
    env = GymEnv("Pendulum-v1")
    Collector(env, None, frames_per_batch=4, total_frames=4).shutdown()
    assert env.is_closed
    kept = GymEnv("Pendulum-v1")
    collector = Collector(kept, None, frames_per_batch=4, total_frames=4)
    collector.shutdown(close_env=False)
    assert not kept.is_closed
    collector.shutdown()  # idempotent: the second call does nothing
    assert not kept.is_closed
    kept.close()


def test_max_frames_per_traj_adds_step_count():
    with Collector(GymEnv("Pendulum-v1", num_envs=2), None, frames_per_batch=10,
                   total_frames=10, max_frames_per_traj=3) as collector:
        batch = next(iter(collector))
    assert isinstance(collector.env, TransformedEnv)
    for key in ("step_count", ("next", "step_count")):
        assert batch[key].shape == (2, 5, 1) and batch[key].dtype == torch.int64
    assert batch["step_count"][0, :, 0].tolist() == [0, 1, 2, 0, 1]
    assert batch["next", "step_count"][0, :, 0].tolist() == [1, 2, 3, 1, 2]
    assert batch["next", "truncated"][0, :, 0].tolist() == [False, False, True, False, False]
    assert batch["next", "done"][0, :, 0].tolist() == [False, False, True, False, False]


def test_max_frames_per_traj_refuses_a_second_step_counter():
    env = TransformedEnv(GymEnv("Pendulum-v1"), StepCounter())
    with pytest.raises(ValueError, match="already has a 'step_count' entry; pass max_frames_per_traj=None"):
        Collector(env, None, frames_per_batch=4, max_frames_per_traj=3)
    env.close()


def test_len_is_the_number_of_batches():
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # frames_per_batch rounded up to the 2 envs
        c = Collector(GymEnv("Pendulum-v1", num_envs=2), None, frames_per_batch=7, total_frames=30)
    assert c.frames_per_batch == 8 and len(c) == 4 == len(list(c))
    c.shutdown()
    endless = Collector(GymEnv("Pendulum-v1"), None, frames_per_batch=4)
    with pytest.raises(RuntimeError, match="total_frames=-1 never stops and has no length"):
        len(endless)
    assert issubclass(NoLengthError, TypeError) and bool(endless)
    endless.shutdown()


def test_user_held_vanilla_updater_pushes_the_trainers_weights():
    trainer = _policy()
    updater = VanillaWeightUpdater()
    # policy_factory: the collector runs its own module, which starts from other weights
    with Collector(GymEnv("Pendulum-v1"), policy_factory=lambda: TensorDictModule(
            torch.nn.Linear(3, 1), in_keys=["observation"], out_keys=["action"]),
                   frames_per_batch=4, weight_updater=updater) as collector:
        with pytest.raises(ValueError, match="no weights given, no weight_getter and no policy to read"):
            updater.push_weights()
        updater.push_weights(trainer)
        assert torch.equal(collector.policy.module.weight, trainer.module.weight)
    with Collector(GymEnv("Pendulum-v1"), trainer, frames_per_batch=4, weight_updater=updater) as collector:
        with torch.no_grad():
            trainer.module.weight.add_(1.0)
        updater.push_weights()  # the collector runs the trainer's module: nothing to copy
        assert collector.policy is trainer
    getter = VanillaWeightUpdater(weight_getter=lambda: {"module": {"weight": torch.full((1, 3), 7.0),
                                                                    "bias": torch.zeros(1)}})
    with Collector(GymEnv("Pendulum-v1"), _policy(), frames_per_batch=4, weight_updater=getter) as collector:
        getter.push_weights()
        assert collector.policy.module.weight.tolist() == [[7.0, 7.0, 7.0]]


def test_step_count_matches_torchrl():
    pytest.importorskip("torchrl")
    from torchrl.collectors import Collector as TorchRLCollector
    from torchrl.envs import GymEnv as TorchRLGymEnv

    ours = Collector(GymEnv("Pendulum-v1"), None, frames_per_batch=12, total_frames=12, max_frames_per_traj=5)
    theirs = TorchRLCollector(TorchRLGymEnv("Pendulum-v1"), None, frames_per_batch=12, total_frames=12,
                              max_frames_per_traj=5)
    a, b = next(iter(ours)), next(iter(theirs))
    ours.shutdown()
    theirs.shutdown()
    assert a["next", "step_count"][:, 0].tolist() == [1, 2, 3, 4, 5, 1, 2, 3, 4, 5, 1, 2]
    for key in ("step_count", ("next", "step_count"), ("next", "truncated"), ("next", "done"), "truncated"):
        assert a[key].dtype == b[key].dtype and torch.equal(a[key], b[key]), key


def test_len_and_shutdown_match_torchrl():
    pytest.importorskip("torchrl")
    from torchrl.collectors import Collector as TorchRLCollector
    from torchrl.envs import GymEnv as TorchRLGymEnv

    theirs_env = TorchRLGymEnv("Pendulum-v1")
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # total_frames not a multiple of frames_per_batch
        theirs = TorchRLCollector(theirs_env, None, frames_per_batch=8, total_frames=30)
    ours_env = GymEnv("Pendulum-v1")
    ours = Collector(ours_env, None, frames_per_batch=8, total_frames=30)
    assert len(ours) == len(theirs) == 4
    theirs.shutdown()
    ours.shutdown()
    assert theirs_env.is_closed and ours_env.is_closed
    # an endless collector: TorchRL's len() raises TypeError (its total_frames is inf); reap's
    # NoLengthError is a TypeError too (and a RuntimeError, what TorchRL's __len__ means to raise)
    for endless in (TorchRLCollector(TorchRLGymEnv("Pendulum-v1"), None, frames_per_batch=8),
                    Collector(GymEnv("Pendulum-v1"), None, frames_per_batch=8)):
        with pytest.raises(TypeError):
            len(endless)
        endless.shutdown()


def test_set_truncated_marks_each_batch_end_as_torchrl():
    from reap_testing import CountingEnv

    policy = TensorDictModule(torch.ones_like, in_keys=["observation"], out_keys=["action"])
    collector = Collector(lambda: CountingEnv(limit=3.0), policy, frames_per_batch=4, total_frames=8,
                          set_truncated=True)
    keys = ["observation", ("next", "done"), ("next", "terminated"), ("next", "truncated"), ("collector", "traj_ids")]
    got = [[batch[k].squeeze(-1).int().tolist() for k in keys] for batch in collector]
    collector.shutdown()
    # TorchRL 0.14.1's Collector on the same dynamics: the last step of a batch is truncated and
    # done (terminated untouched), and the env is not reset there: the next batch goes on
    assert got == [
        [[0, 1, 2, 0], [0, 0, 1, 1], [0, 0, 1, 0], [0, 0, 0, 1], [0, 0, 0, 1]],
        [[1, 2, 0, 1], [0, 1, 0, 1], [0, 1, 0, 0], [0, 0, 0, 1], [1, 1, 2, 2]],
    ]


def test_fake_tensordict_is_laid_out_as_a_real_batch():
    collector = Collector(GymEnv("Pendulum-v1"), _policy(), frames_per_batch=6, set_truncated=True,
                          postproc=lambda td: td.set("seen", torch.ones(td.shape)))
    fake = collector.fake_tensordict()
    real = collector.next()
    collector.shutdown()
    layout = lambda td: {k: (td[k].shape, td[k].dtype) for k in td.keys(True, True)}  # noqa: E731
    assert layout(fake) == layout(real)
    assert fake["next", "truncated"].flatten().tolist() == [False] * 5 + [True]
    assert fake["seen"].all() and not fake["observation"].any()


def test_policy_version_counts_weight_updates_as_torchrl():
    policy = _policy()
    collector = Collector(GymEnv("Pendulum-v1"), policy, frames_per_batch=4)
    assert collector.get_policy_version() == collector.policy_version == 0
    collector.update_policy_weights_({"module.weight": torch.ones(1, 3), "module.bias": torch.zeros(1)})
    collector.update_policy_weights_(policy)
    assert collector.get_policy_version() == collector.policy_version == 2
    collector.shutdown()


class _OwnState(torch.nn.Module):
    """Reads a ``memory`` the env does not produce (None when absent) and writes it and the next one."""

    def forward(self, observation, memory=None):
        if memory is None:
            memory = torch.zeros(*observation.shape[:-1], 1)
        return memory, memory + 1, torch.zeros(observation.shape[:-1], dtype=torch.int64)


def _own_state_policy(kind):
    module = TensorDictModule(_OwnState(), in_keys=["observation", "memory"],
                              out_keys=["memory", ("next", "memory"), "action"])  # the action last
    return module if kind == "module" else TensorDictSequential(module)  # the second: the carrier path


OWN_STATE_KEYS = {"action", "memory", "observation", "done", "terminated", "truncated", ("collector", "traj_ids"),
                  *(("next", k) for k in ("memory", "observation", "reward", "done", "terminated", "truncated"))}


@pytest.mark.parametrize("kind", ["module", "sequential"])
def test_a_policy_reading_a_state_the_env_lacks_gets_none_at_each_step(kind):
    # TorchRL's collectors pass None for an input the env does not produce, and do not carry the
    # policy's ("next", key) to the next root without a TensorDictPrimer: the same here
    env = GymEnv("CartPole-v1", categorical_action_encoding=True)
    with Collector(env, _own_state_policy(kind), frames_per_batch=30, total_frames=60) as collector:
        batches = list(collector)
    for batch in batches:
        assert set(batch.keys(True, True)) == OWN_STATE_KEYS
        assert batch["memory"].shape == batch["next", "memory"].shape == (30, 1)
        assert batch["memory"].eq(0).all() and batch["next", "memory"].eq(1).all()
        assert batch["action"].eq(0).all()  # the outputs land in their own entries, whatever their order
    assert batches[0]["next", "done"].any()  # pushing left, CartPole falls within ~10 steps
    with pytest.raises(KeyError, match=r"policy reads \['memroy'\], which the env does not produce"):
        Collector(GymEnv("CartPole-v1"), TensorDictModule(_OwnState(), in_keys=["observation", "memroy"],
                                                          out_keys=["memory", ("next", "memory"), "action"]),
                  frames_per_batch=8)

    class NoDefault(torch.nn.Module):  # None for memory would reach `memory + 1`: refused up front
        def forward(self, observation, memory):
            return memory, memory + 1, torch.zeros(observation.shape[:-1], dtype=torch.int64)

    with pytest.raises(KeyError, match=r"policy reads 'memory', which the env does not produce \(it is passed None "
                                       r"at every step, as in TorchRL\), but NoDefault.forward's argument 'memory' "
                                       r"has no default: give it one \(memory=None\) or add a TensorDictPrimer"):
        Collector(GymEnv("CartPole-v1"), TensorDictModule(NoDefault(), in_keys=["observation", "memory"],
                                                          out_keys=["memory", ("next", "memory"), "action"]),
                  frames_per_batch=8)


def test_a_policy_reading_a_state_the_env_lacks_matches_torchrl():
    pytest.importorskip("torchrl")
    from torchrl.collectors import Collector as TorchRLCollector
    from torchrl.envs import GymEnv as TorchRLGymEnv

    ours = Collector(GymEnv("CartPole-v1", categorical_action_encoding=True), _own_state_policy("module"),
                     frames_per_batch=30, total_frames=30)
    theirs = TorchRLCollector(TorchRLGymEnv("CartPole-v1", categorical_action_encoding=True),
                              _own_state_policy("module"), frames_per_batch=30, total_frames=30)
    a, b = next(iter(ours)), next(iter(theirs))
    ours.shutdown()
    theirs.shutdown()
    assert set(a.keys(True, True)) == set(b.keys(True, True)) == OWN_STATE_KEYS
    for key in ("memory", ("next", "memory"), "action"):
        assert a[key].dtype == b[key].dtype and torch.equal(a[key], b[key]), key


# ---- pre_collect_hook / post_collect_hook / track_policy_version (TorchRL's) ----------------------
def _counting_collector(**kwargs):
    return Collector(GymEnv("Pendulum-v1"), None, frames_per_batch=4, total_frames=12, **kwargs)


def test_collect_hooks_run_once_per_batch_around_the_rollout():
    calls = []
    with _counting_collector(pre_collect_hook=lambda: calls.append("pre"),
                             post_collect_hook=lambda batch: calls.append(batch["marked"].sum().item()),
                             postproc=lambda batch: batch.set("marked", torch.ones(batch.batch_size))) as c:
        batches = list(c)
    assert calls == ["pre", 4.0, "pre", 4.0, "pre", 4.0]  # the hook sees the batch after postproc
    assert len(batches) == 3


def test_collect_hooks_none_by_default_and_set_later():
    seen = []
    with _counting_collector() as c:
        assert c.pre_collect_hook is None and c.post_collect_hook is None
        first = next(iter(c))
        c.set_post_collect_hook(seen.append)
        c.pre_collect_hook = lambda: seen.append("pre")
        assert c.post_collect_hook == seen.append
        batches = list(c)
    assert first is not None and seen[0] == "pre" and seen[1] is batches[0]
    assert len(seen) == 2 * len(batches) == 4


def test_post_collect_hook_error_stops_iteration_and_bad_hooks_are_named():
    def fails(batch):
        raise RuntimeError("hook failed")

    with _counting_collector(post_collect_hook=fails) as c, pytest.raises(RuntimeError, match="hook failed"):
        list(c)
    with pytest.raises(TypeError, match="pre_collect_hook must be a callable or None, got 3"):
        _counting_collector(pre_collect_hook=3)
    with _counting_collector() as c, pytest.raises(TypeError, match="post_collect_hook must be a callable"):
        c.post_collect_hook = "metrics"


def test_track_policy_version_counts_weight_updates():
    policy = _policy()
    with Collector(GymEnv("Pendulum-v1"), policy, frames_per_batch=5, total_frames=20,
                   track_policy_version=True) as c:
        it = iter(c)
        versions = [next(it)["next", "policy_version"]]
        c.update_policy_weights_()
        versions += [next(it)["next", "policy_version"], next(it)["policy_version"]]
    assert versions[0].dtype == torch.int64 and versions[0].shape == (5,)
    assert [v.unique().tolist() for v in versions] == [[0], [1], [1]]
    with pytest.raises(TypeError, match="track_policy_version must be True or False, got 'uuid'"):
        Collector(GymEnv("Pendulum-v1"), None, frames_per_batch=4, track_policy_version="uuid")


def test_track_policy_version_layout_is_torchrls():
    torchrl = pytest.importorskip("torchrl")
    from torchrl.collectors import Collector as TorchRLCollector
    from torchrl.envs import GymEnv as TorchRLGymEnv

    theirs = TorchRLCollector(TorchRLGymEnv("Pendulum-v1"), None, frames_per_batch=5, total_frames=5,
                              track_policy_version=True)
    expected = next(iter(theirs))
    theirs.shutdown()
    with Collector(GymEnv("Pendulum-v1"), None, frames_per_batch=5, total_frames=5, track_policy_version=True) as c:
        batch = next(iter(c))
    for key in ("policy_version", ("next", "policy_version")):
        assert (batch[key].shape, batch[key].dtype) == (expected[key].shape, expected[key].dtype), torchrl.__version__
        assert batch[key].tolist() == expected[key].tolist()


# ---- a plain module as the policy (TorchRL wraps it) ------------------------------------------------
class _TwoOutputs(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.linear = torch.nn.Linear(3, 1)

    def forward(self, observation):
        action = self.linear(observation)
        return action, action.sum(-1), action.abs()


class _NeedsMore(torch.nn.Module):
    def forward(self, observation, other_stuff):
        return observation[..., :1]


def test_a_module_returning_a_tuple_writes_output1_and_so_on():
    policy = _TwoOutputs()
    with Collector(GymEnv("Pendulum-v1"), policy, frames_per_batch=4, total_frames=8) as c:
        it = iter(c)
        batch = next(it)
        with torch.no_grad():
            policy.linear.weight.zero_()
            policy.linear.bias.fill_(0.5)
        c.update_policy_weights_()
        after = next(it)
    assert batch["output1"].shape == (4,) and batch["output2"].shape == (4, 1)
    assert torch.equal(batch["output1"], batch["action"].sum(-1))
    assert torch.equal(batch["output2"], batch["action"].abs())
    assert after["action"].flatten().tolist() == [0.5] * 4


def test_a_module_whose_arguments_are_not_the_envs_is_refused():
    with pytest.raises(TypeError, match=r"^policy: Arguments to policy.forward are incompatible with entries in the "
                                        r"env's observations \(TorchRL's words\): _NeedsMore.forward requires "
                                        r"\['observation', 'other_stuff'\], the observations are \['observation'\]; "
                                        r"name its arguments"):
        Collector(GymEnv("Pendulum-v1"), _NeedsMore(), frames_per_batch=4)


# ---- private entries ("_..." anywhere in the key) stay out of batches, as TorchRL's -----------------
def _private_writer(key):
    linear = TensorDictModule(torch.nn.Linear(3, 1), in_keys=["observation"], out_keys=["action"])
    copier = TensorDictModule(lambda x: x * 2, in_keys=["observation"], out_keys=[key])
    return TensorDictSequential(linear, copier)


@pytest.mark.parametrize("key", ["_dummy", ("out", "_dummy"), ("_out", "dummy")])
def test_private_policy_outputs_stay_out_of_batches(key):
    with Collector(GymEnv("Pendulum-v1"), _private_writer(key), frames_per_batch=4, total_frames=8) as c:
        batch = next(iter(c))
        assert key not in batch.keys(True, True) and "action" in batch.keys()
        c._exclude_private_keys = False  # TorchRL's switch, to keep them
        kept = next(iter(c))
    assert torch.equal(kept[key], kept["observation"] * 2)


def test_private_outputs_as_torchrl():
    pytest.importorskip("torchrl")
    from torchrl.collectors import Collector as TorchRLCollector
    from torchrl.envs import GymEnv as TorchRLGymEnv

    theirs = TorchRLCollector(TorchRLGymEnv("Pendulum-v1"), _private_writer(("out", "_dummy")), frames_per_batch=4,
                              total_frames=4)
    expected = next(iter(theirs))
    theirs.shutdown()
    with Collector(GymEnv("Pendulum-v1"), _private_writer(("out", "_dummy")), frames_per_batch=4,
                   total_frames=4) as c:
        batch = next(iter(c))
    assert set(batch.keys(True, True)) - {"truncated"} == set(expected.keys(True, True)) - {"truncated"}


# ---- extend_buffer=False: the buffer gets the steps one by one (TorchRL's) ----------------------------
def test_extend_buffer_false_writes_each_step_as_torchrl():
    from reap import LazyTensorStorage, ReplayBuffer, SerialEnv

    torchrl = pytest.importorskip("torchrl")
    from torchrl.collectors import Collector as TorchRLCollector
    from torchrl.data import LazyTensorStorage as TorchRLStorage
    from torchrl.data import ReplayBuffer as TorchRLBuffer
    from torchrl.envs import GymEnv as TorchRLGymEnv
    from torchrl.envs import SerialEnv as TorchRLSerialEnv
    from torchrl.envs import StepCounter as TorchRLStepCounter

    for ndim in (1, 2):
        theirs = TorchRLBuffer(storage=TorchRLStorage(64, ndim=ndim))
        env = TorchRLSerialEnv(2, lambda: TorchRLGymEnv("CartPole-v1").append_transform(TorchRLStepCounter()))
        collector = TorchRLCollector(env, None, frames_per_batch=8, total_frames=8, replay_buffer=theirs,
                                     extend_buffer=False)
        list(collector)
        collector.shutdown()
        ours = ReplayBuffer(storage=LazyTensorStorage(64, ndim=ndim))
        env = SerialEnv(2, lambda: TransformedEnv(GymEnv("CartPole-v1"), StepCounter()))
        with Collector(env, None, frames_per_batch=8, total_frames=8, replay_buffer=ours, extend_buffer=False) as c:
            assert list(c) == [None]
        assert len(ours) == len(theirs), (ndim, torchrl.__version__)
        assert ours[:]["step_count"].tolist() == theirs[:]["step_count"].tolist()


# ---- TorchRL's remote helpers on a local collector ----------------------------------------------------
def test_get_distant_attr_and_map_fn():
    with Collector(GymEnv("Pendulum-v1"), None, frames_per_batch=4, worker_idx=5) as c:
        assert c.get_distant_attr("worker_idx") == 5
        assert c.get_distant_attr("env.batch_size") == torch.Size([])
        assert c.map_fn("get_distant_attr", [("worker_idx",), ("frames_per_batch",)]) == [5, 4]
        assert c.map_fn("set_seed", list_of_kwargs=[{"seed": 3}]) == [seed_generator(3)]  # the env's next seed
        with pytest.raises(ValueError, match="list_of_args and list_of_kwargs must have the same length, got 1 and 2"):
            c.map_fn("get_distant_attr", [("worker_idx",)], [{}, {}])
        with pytest.raises(TypeError, match="map_fn: 'frames_per_batch' is not a method"):
            c.map_fn("frames_per_batch")
        with pytest.raises(ValueError, match="cannot read attribute path 'env..x'"):
            c.get_distant_attr("env..x")


# ---- auto_register_policy_transforms (TorchRL's; default True from its 0.15) --------------------------
def _recurrent_policy():
    from reap_rnn import GRUModule

    gru = GRUModule(input_size=3, hidden_size=8, in_keys=["observation", "recurrent_state", "is_init"],
                    out_keys=["features", ("next", "recurrent_state")])
    return TensorDictSequential(gru, TensorDictModule(torch.nn.Linear(8, 1), in_keys=["features"],
                                                      out_keys=["action"]))


def test_auto_register_policy_transforms_appends_what_the_recurrent_policy_needs():
    pytest.importorskip("reap_rnn")
    with Collector(GymEnv("Pendulum-v1"), _recurrent_policy(), frames_per_batch=4, total_frames=4,
                   auto_register_policy_transforms=True) as c:
        assert [type(t).__name__ for t in c.env.transform] == ["InitTracker", "TensorDictPrimer"]
        batch = next(iter(c))
    assert batch["is_init"][:, 0].tolist() == [True, False, False, False]
    assert batch["recurrent_state"].shape == (4, 1, 8) and not batch["recurrent_state"][0].any()
    assert torch.equal(batch["recurrent_state"][1:], batch["next", "recurrent_state"][:-1])
    env = TransformedEnv(GymEnv("Pendulum-v1"), StepCounter())
    with Collector(env, _recurrent_policy(), frames_per_batch=4, auto_register_policy_transforms=True) as c:
        assert [type(t).__name__ for t in c.env.transform] == ["StepCounter", "InitTracker", "TensorDictPrimer"]


def test_auto_register_policy_transforms_true_tracks_inits_for_any_module_policy():
    """TorchRL's rule: with True, a module policy that is not recurrent gets an InitTracker too
    (its batches gain "is_init"); unset, reap warns only for what a recurrent module needs
    (TorchRL warns for every module policy: README "What differs")."""
    policy = TensorDictModule(torch.nn.Linear(3, 1), in_keys=["observation"], out_keys=["action"])
    with Collector(GymEnv("Pendulum-v1"), policy, frames_per_batch=4, total_frames=4,
                   auto_register_policy_transforms=True) as c:
        assert type(c.env.transform).__name__ == "InitTracker"
        assert next(iter(c))["is_init"][:, 0].tolist() == [True, False, False, False]
    with warnings.catch_warnings():
        warnings.simplefilter("error", FutureWarning)
        with Collector(GymEnv("Pendulum-v1"), policy, frames_per_batch=4, total_frames=4) as c:
            assert "is_init" not in next(iter(c)).keys()


def test_auto_register_policy_transforms_unset_warns_and_false_is_silent():
    pytest.importorskip("reap_rnn")
    with pytest.warns(FutureWarning, match=r"lacks transforms the policy needs \(InitTracker, TensorDictPrimer\); "
                                           "pass auto_register_policy_transforms=True"):
        with pytest.raises(KeyError, match="is_init"):
            Collector(GymEnv("Pendulum-v1"), _recurrent_policy(), frames_per_batch=4)
    with warnings.catch_warnings():
        warnings.simplefilter("error", FutureWarning)
        with pytest.raises(KeyError, match="is_init"):
            Collector(GymEnv("Pendulum-v1"), _recurrent_policy(), frames_per_batch=4,
                      auto_register_policy_transforms=False)
    with pytest.raises(TypeError, match="auto_register_policy_transforms must be True, False or None, got 'yes'"):
        Collector(GymEnv("Pendulum-v1"), _recurrent_policy(), frames_per_batch=4,
                  auto_register_policy_transforms="yes")


def test_the_batch_keeps_the_policys_action_dtype():
    """An int32 one-hot policy on an int64 OneHot spec: the env gets int64, the batch int32 (TorchRL's)."""
    class OneHotFirst(torch.nn.Module):
        def forward(self, observation):
            return torch.nn.functional.one_hot(torch.zeros(observation.shape[:-1], dtype=torch.int64), 2).int()

    policy = TensorDictModule(OneHotFirst(), in_keys=["observation"], out_keys=["action"])
    env = GymEnv("CartPole-v1", categorical_action_encoding=False)
    assert env.action_spec.dtype == torch.int64
    with Collector(env, policy, frames_per_batch=4, total_frames=4) as c:
        batch = next(iter(c))
        assert c.empty_batch()["action"].dtype == torch.int32
    assert batch["action"].dtype == torch.int32 and batch["action"].tolist() == [[1, 0]] * 4
    assert batch["next", "observation"][1:, 1].lt(batch["observation"][1:, 1]).all()  # always pushed left


@pytest.mark.parametrize("kwargs", [{}, {"storing_device": "cpu"}, {"device": "cpu"}])
def test_batch_device_as_torchrl(kwargs):
    pytest.importorskip("torchrl")
    from torchrl.collectors import Collector as TorchRLCollector
    from torchrl.envs import GymEnv as TorchRLGymEnv

    theirs = TorchRLCollector(TorchRLGymEnv("CartPole-v1"), None, frames_per_batch=4, total_frames=4, **kwargs)
    expected = next(iter(theirs)).device
    theirs.shutdown()
    with Collector(GymEnv("CartPole-v1"), None, frames_per_batch=4, total_frames=4, **kwargs) as c:
        assert next(iter(c)).device == expected


@pytest.mark.parametrize("kwargs, device", [
    ({}, None),
    ({"env_device": "cpu"}, None),
    ({"env_device": "cpu", "policy_device": "cpu"}, torch.device("cpu")),  # the device both share
    ({"env_device": "cpu", "policy_device": "cpu", "storing_device": None, "device": "cpu"}, torch.device("cpu")),
])
def test_batch_device_falls_back_to_the_device_env_and_policy_share(kwargs, device):
    """TorchRL's rule, without TorchRL installed: storing_device, else device, else the device the
    env and the policy share."""
    with Collector(GymEnv("CartPole-v1"), None, frames_per_batch=4, total_frames=4, **kwargs) as c:
        assert next(iter(c)).device == device


def test_a_custom_env_with_a_device_steps_tensordicts_on_it():
    """TorchRL hands an env with a device TensorDicts on that device (its _step may check)."""
    class EnvOnCPU(EnvBase):
        def __init__(self):
            super().__init__(device="cpu")
            self.observation_spec = Composite(observation=Unbounded(()))
            self.action_spec = Unbounded(())
            self.seen = []

        def _reset(self, tensordict):
            self.seen.append(None if tensordict is None else tensordict.device)
            return TensorDict(observation=torch.zeros(()), device=self.device)

        def _step(self, tensordict):
            self.seen.append(tensordict.device)
            return TensorDict(observation=torch.zeros(()), reward=torch.zeros(1), done=torch.zeros(1, dtype=torch.bool),
                              device=self.device)

        def _set_seed(self, seed):
            pass

    env = EnvOnCPU()
    with Collector(env, None, frames_per_batch=3, total_frames=3) as c:
        next(iter(c))
    assert env.seen[1:] == [torch.device("cpu")] * 3


def test_random_policy_with_one_envs_spec_on_a_batched_env():
    from reap import RandomPolicy, SerialEnv

    policy = RandomPolicy(GymEnv("Pendulum-v1").action_spec)  # shape (1,), for one env
    with Collector(SerialEnv(3, lambda: GymEnv("Pendulum-v1")), policy, frames_per_batch=30, total_frames=30) as c:
        batch = next(iter(c))
    assert policy.action_spec.shape == (3, 1) and batch["action"].shape == (3, 10, 1)
    assert batch["action"][:, 0].unique().numel() == 3  # each env draws its own


class _StopAfter:
    """TorchRL's interruptor protocol, as any object may give it: stop after ``n`` polls."""

    def __init__(self, n):
        self.polls, self.n = 0, n

    def collection_stopped(self):
        self.polls += 1
        return self.polls > self.n


@pytest.mark.parametrize("make_env, path, obs", [
    (lambda: GymEnv("Pendulum-v1"), "arrays", "observation"),  # no done within 13 steps
    (lambda: __import__("reap_testing").AgentsEnv(limit=1000), "tensordict", ("agents", "obs")),  # 2 envs, no done
])
def test_an_interruptor_ends_the_rollout_and_marks_the_steps_not_collected(make_env, path, obs):
    """TorchRL's interruptor: polled after each step; the batch keeps its size, the steps not
    collected get traj id -1, and the next rollout goes on from the last step collected."""
    interruptor = _StopAfter(2)  # 3 steps, then stop
    with Collector(make_env(), None, frames_per_batch=10, total_frames=-1, interruptor=interruptor) as c:
        assert c.path == path
        it = iter(c)
        first = next(it)
        interruptor.n = 10**9  # the next rollout runs whole
        second = next(it)
        frames = c.frames
    time_dim = first.batch_dims - 1
    ids = first["collector", "traj_ids"].movedim(time_dim, 0).reshape(first.batch_size[time_dim], -1)
    assert (ids[:3] != -1).all() and (ids[3:] == -1).all()
    assert (second["collector", "traj_ids"] != -1).all()
    assert frames == 2 * c.frames_per_batch and first.batch_size == second.batch_size
    assert torch.equal(second[obs].select(time_dim, 0), first["next", obs].select(time_dim, 2))


def test_an_interruptor_must_have_collection_stopped():
    with pytest.raises(TypeError, match=r"Collector: interruptor must have a collection_stopped\(\) method"):
        Collector(GymEnv("CartPole-v1"), None, frames_per_batch=4, interruptor=object())


@pytest.mark.parametrize("batch", [None, 2])
def test_an_action_without_the_specs_trailing_one_reaches_the_env(batch):
    """TorchRL's envs take ``torch.ones(td.shape)`` for an action spec of shape ``(*batch, 1)``:
    reap lays the action out as the spec's, and the env (whose reward echoes it) sees each one."""
    from reap_testing import EchoEnv

    def policy(td):
        return td.set("action", torch.full(td.shape, 3.0))

    with Collector(EchoEnv(batch), policy, frames_per_batch=8, total_frames=16, init_random_frames=8) as c:
        random, chosen = list(c)
    for b in (random, chosen):
        assert b["action"].shape[-1] == 1 and torch.equal(b["next", "reward"], b["action"])
    assert (chosen["action"] == 3.0).all() and not (random["action"] == 3.0).any()


@pytest.mark.parametrize("make_env, obs", [
    (lambda: TransformedEnv(GymEnv("Pendulum-v1"), __import__("reap").InitTracker()), "observation"),
    (lambda: __import__("reap_testing").AgentsEnv(limit=1000), ("agents", "obs")),  # the TensorDict path
])
def test_compact_obs_leaves_the_next_observations_out(make_env, obs):
    """TorchRL's compact_obs: ("next", obs) and ("next", state) leave the batch (each is the next
    step's root); rewards and done flags stay; what is left equals a full batch's."""
    env = make_env()
    assert ("next", *((obs,) if isinstance(obs, str) else obs)) in env._compact_next_keys()
    with Collector(make_env(), None, frames_per_batch=8, total_frames=8, compact_obs=True) as c:
        c.set_seed(0)
        compact = next(iter(c))
    with Collector(make_env(), None, frames_per_batch=8, total_frames=8) as c:
        c.set_seed(0)
        full = next(iter(c))
    dropped = set(full.keys(True, True)) - set(compact.keys(True, True))
    assert dropped == set(make_env()._compact_next_keys())
    assert ("next", "done") in compact.keys(True, True)
    for key in compact.keys(True, True):
        assert torch.equal(compact[key], full[key]), key
    time_dim = full.batch_dims - 1
    steps = full.batch_size[time_dim]
    assert torch.equal(compact[obs].narrow(time_dim, 1, steps - 1),  # no done in these 8 frames
                       full["next", obs].narrow(time_dim, 0, steps - 1))


def _labels_follow_the_steps(batch):
    """TorchRL's check: each step's label is the step count, "reset" after a reset, and the root's
    is the "next" label of the step before."""
    labels, nexts = list(batch["label"]), list(batch["next", "label"])
    for t in range(1, len(labels)):
        if labels[t] == "reset":
            assert nexts[t] == "step 1"
        else:
            assert labels[t] == nexts[t - 1] and int(labels[t].split()[1]) + 1 == int(nexts[t].split()[1])


def test_a_non_tensor_entry_is_collected_one_tensordict_per_step():
    from reap_testing.labels import labelled_env

    with Collector(labelled_env(), None, frames_per_batch=50, total_frames=100) as c:
        assert c.path == "tensordict" and c.path_reason == "non-tensor entry 'label'"
        batches = list(c)
    for batch in batches:
        assert isinstance(batch.get("label"), NonTensorStack) and len(list(batch["label"])) == 50
        _labels_follow_the_steps(batch)
    assert "reset" in list(batches[0]["label"]) + list(batches[1]["label"])  # CartPole ended within 100


def test_variable_shape_entries_give_lazy_stacked_batches():
    """TorchRL's: an env whose spec has a -1 dim is collected into a lazy stack of its steps;
    there is no fixed layout to preallocate (return_same_td says so)."""
    from tensordict import LazyStackedTensorDict

    from reap_testing import GrowingEnv

    with Collector(GrowingEnv(), None, frames_per_batch=12, total_frames=24) as c:
        assert c.path == "tensordict" and c.path_reason == "variable-shape entry 'observation' (a -1 dim in its spec)"
        assert not c.fixed_layout
        batches = list(c)
    for batch in batches:
        assert isinstance(batch, LazyStackedTensorDict) and batch.batch_size == (12,) and batch.names[-1] == "time"
    rows = [batches[0][t]["observation"].shape[0] for t in range(12)]
    assert rows == [1, 2, 3, 4, 5, 1, 2, 3, 4, 5, 1, 2]
    assert batches[0]["collector", "traj_ids"].tolist() == [0] * 5 + [1] * 5 + [2] * 2
    assert torch.equal(batches[0][4]["next", "observation"], torch.full((6, 2), 5.0))
    with pytest.raises(ValueError, match=r"variable-shape entries \['observation'\]: its batches have no fixed layout"):
        Collector(GrowingEnv(), None, frames_per_batch=4, return_same_td=True).next()


def test_an_interrupted_rollout_of_a_non_tensor_entry_holds_none_where_nothing_was_collected():
    from reap_testing.labels import labelled_env

    with Collector(labelled_env(), None, frames_per_batch=6, total_frames=6, interruptor=_StopAfter(2)) as c:
        batch = next(iter(c))
    assert batch["collector", "traj_ids"].tolist()[3:] == [-1] * 3
    assert list(batch["label"]) == ["reset", "step 1", "step 2", None, None, None]
