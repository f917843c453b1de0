"""reap finds reap-replay through its entry point: ``from reap import ReplayBuffer`` works."""

import reap_replay


def test_every_public_class_is_exported_through_reap():
    import reap

    for name in reap_replay.__all__:
        assert getattr(reap, name) is getattr(reap_replay, name), name


def test_from_reap_import():
    from reap import LazyMemmapStorage, ReplayBuffer, TensorDictPrioritizedReplayBuffer

    assert ReplayBuffer is reap_replay.ReplayBuffer
    assert LazyMemmapStorage is reap_replay.LazyMemmapStorage
    assert TensorDictPrioritizedReplayBuffer is reap_replay.TensorDictPrioritizedReplayBuffer
