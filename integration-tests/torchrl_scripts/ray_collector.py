"""TorchRL's RayCollector docstring example, on a local Ray sized for a small machine."""

from tensordict.nn import TensorDictModule
from torch import nn
from torchrl.collectors import Collector
from torchrl.collectors.distributed import RayCollector
from torchrl.envs.libs.gym import GymEnv

if __name__ == "__main__":
    env_maker = lambda: GymEnv("Pendulum-v1", device="cpu")  # noqa: E731
    policy = TensorDictModule(nn.Linear(3, 1), in_keys=["observation"], out_keys=["action"])
    distributed_collector = RayCollector(
        create_env_fn=[env_maker],
        policy=policy,
        collector_class=Collector,
        max_frames_per_traj=50,
        init_random_frames=-1,
        reset_at_each_iter=-False,
        collector_kwargs={
            "device": "cpu",
            "storing_device": "cpu",
        },
        num_collectors=1,
        total_frames=10000,
        frames_per_batch=200,
        ray_init_config={"num_cpus": 2, "include_dashboard": False,
                         "_node_ip_address": "127.0.0.1"},
    )
    for i, data in enumerate(distributed_collector):
        if i == 2:
            print(data)
            break
    distributed_collector.shutdown(shutdown_ray=True)
