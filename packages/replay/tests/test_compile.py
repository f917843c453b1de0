"""A buffer used inside ``torch.compile``d code compiles once: the writer's cursor and the
storage's length (Python ints) stay out of the graph, as TorchRL's compilable buffers do."""

import pytest
import torch

from reap_replay.buffers import ReplayBuffer
from reap_replay.samplers import RandomSampler
from reap_replay.storages import LazyTensorStorage
from reap_replay.writers import RoundRobinWriter


@pytest.mark.parametrize("room", ["wraps", "fills"])
def test_extend_and_sample_compile_once(room):
    torch._dynamo.reset()
    capacity = 6 if room == "wraps" else 33
    rb = ReplayBuffer(storage=LazyTensorStorage(capacity, compilable=True), sampler=RandomSampler(),
                      writer=RoundRobinWriter(compilable=True), batch_size=4, compilable=True)

    @torch.compile(backend="eager")
    def extend_and_sample(data):
        rb.extend(data)
        return rb.sample() * 2

    data = torch.arange(3.0).unsqueeze(-1)
    for _ in range(3):  # the first calls compile (and may recompile once the storage exists)
        extend_and_sample(data)
    with torch._dynamo.config.patch(error_on_recompile=True):
        for _ in range(7):
            out = extend_and_sample(data)
    assert len(rb) == min(30, capacity) and out.shape == (4, 1) and set(out.flatten().tolist()) <= {0.0, 2.0, 4.0}
