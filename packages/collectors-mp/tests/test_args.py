import pytest
import torch

from reap_mp import MultiAsyncCollector, MultiSyncCollector, ParallelEnv
from reap_testing import constant_policy as policy
from reap_testing import env_fn

GOOD = {"frames_per_batch": 8}


@pytest.mark.parametrize(
    ("kwargs", "match"),
    [
        ({"create_env_fn": []}, "create_env_fn is an empty list"),
        ({"cat_results": "foo"}, "cat_results must be"),
        ({"frames_per_batch": [4, 4, 4]}, "frames_per_batch has 3 entries but there are 2 workers"),
        ({"frames_per_batch": -4}, "frames_per_batch must be a positive int"),
        ({"frames_per_batch": [4, 0]}, "frames_per_batch must be a positive int"),
        ({"total_frames": -5}, "total_frames must be a positive int"),
        ({"max_frames_per_traj": 0}, "max_frames_per_traj must be a positive int"),
        ({"init_random_frames": 2.5}, "init_random_frames must be a whole number of frames"),
        ({"exploration_type": "greedy"}, "exploration_type must be an ExplorationType or one of"),
        ({"policy_device": "bogus"}, "policy_device='bogus' is not a device"),
        ({"on_worker_failure": "bogus"}, "on_worker_failure must be one of"),
        ({"worker_timeout": 0}, "worker_timeout must be a positive number"),
        ({"mp_start_method": "threads"}, "mp_start_method must be one of"),
        ({"weight_sync_schemes": {"critic": "pipe"}}, "weight_sync_schemes has models"),
        ({"env_device": "cuda"}, "env_device='cuda'"),
        ({"num_workers": 3}, "num_workers=3 but create_env_fn has 2"),
        ({"preemptive_threshold": 1.5}, "preemptive_threshold must be between 0.0 and 1.0"),
        ({"worker_tags": "yes"}, "worker_tags must be True or False, got 'yes'"),
        ({"bogus_option": 1}, "unexpected keyword argument 'bogus_option'"),
    ],
)
def test_bad_arguments_name_the_argument(kwargs, match):
    args = {"create_env_fn": [env_fn(), env_fn()], "policy": policy(), **GOOD, **kwargs}
    with pytest.raises((ValueError, TypeError, NotImplementedError), match=match):
        MultiSyncCollector(**args)


def test_bad_policy_arguments():
    with pytest.raises(ValueError, match="policy_factory has 1 entries but there are 2 workers"):
        MultiSyncCollector([env_fn(), env_fn()], policy_factory=[policy], frames_per_batch=4)
    with pytest.raises(TypeError, match="not an env instance"):
        MultiSyncCollector(env_fn()(), policy(), frames_per_batch=4)
    with pytest.raises(ValueError, match="cat_results=0 only applies to MultiSyncCollector"):
        MultiAsyncCollector([env_fn()], policy(), frames_per_batch=4, cat_results="cat")


def test_parallel_env_bad_arguments():
    with pytest.raises(ValueError, match="num_workers must be a positive int"):
        ParallelEnv(0, env_fn())
    with pytest.raises(ValueError, match="create_env_fn has 3 callables but num_workers=2"):
        ParallelEnv(2, [env_fn()] * 3)


def test_env_instances_in_the_list_are_copied_to_each_worker():
    """TorchRL's: an env instance in create_env_fn travels pickled; each worker steps its own copy."""
    import threading

    from reap import SerialEnv

    env = SerialEnv(2, env_fn())
    with MultiSyncCollector([env, env], None, frames_per_batch=8, total_frames=16, cat_results="stack",
                            mp_start_method="forkserver") as c:
        batches = list(c)
    assert [b.batch_size for b in batches] == [torch.Size([2, 2, 2])] * 2
    ids = batches[0]["collector", "traj_ids"][:, :, 0]
    assert len(set(ids.flatten().tolist())) == 4  # two workers, two envs each: no shared trajectory
    env.lock = threading.Lock()
    with pytest.raises(TypeError, match=r"create_env_fn\[0\] is an env instance that cannot be sent to a worker"):
        MultiSyncCollector([env, env], None, frames_per_batch=8)
