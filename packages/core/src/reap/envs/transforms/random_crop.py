"""``RandomCropTensorDict``: a random window of ``sub_seq_len`` steps from each sequence of a
batch (TorchRL's; for replay buffers and modules, not envs).

Examples:
    >>> import torch
    >>> from tensordict import TensorDict
    >>> from reap.envs.transforms import RandomCropTensorDict
    >>> batch = TensorDict(step=torch.arange(10).expand(4, 10), batch_size=[4, 10])
    >>> crop = RandomCropTensorDict(3)(batch)
    >>> crop.shape, bool((crop["step"].diff(dim=-1) == 1).all())
    (torch.Size([4, 3]), True)
"""

from __future__ import annotations

import warnings

import torch

from reap.envs.transforms.transform import Transform, missing_tolerance


class RandomCropTensorDict(Transform):
    """Each sequence along ``sample_dim`` (default -1, time) cut to a window of ``sub_seq_len``
    consecutive steps starting at random, every start equally likely.

    With ``mask_key`` (a boolean entry shaped like the batch, True on the valid steps, first),
    windows lie within each sequence's valid steps. Unlike TorchRL 0.14.1's, the last possible
    start is drawn too, and data exactly ``sub_seq_len`` long is returned whole (TorchRL's never
    starts at the last one and raises there).

    Args:
        sub_seq_len: the window's length.
        sample_dim: the dim cut (negative preferred: the batch dims may vary).
        mask_key: the valid-steps mask, if any.
    """

    def __init__(self, sub_seq_len: int, sample_dim: int = -1, mask_key=None):
        if not isinstance(sub_seq_len, int) or sub_seq_len < 1:
            raise ValueError(f"RandomCropTensorDict: sub_seq_len must be a positive int, got {sub_seq_len!r}")
        if sample_dim > 0:
            warnings.warn("A positive shape has been passed to the RandomCropTensorDict constructor: with batches of "
                          "varying dims it may cut another dim than time (the last dim by convention); prefer a "
                          "negative sample_dim.", stacklevel=2)
        super().__init__()
        self.sub_seq_len = sub_seq_len
        self.sample_dim = sample_dim
        self.mask_key = mask_key

    def forward(self, tensordict):
        shape, dim = tensordict.shape, self.sample_dim
        if not len(shape):
            raise RuntimeError("Cannot sub-sample from a tensordict with an empty shape.")
        if shape[dim] < self.sub_seq_len:
            raise RuntimeError(f"Cannot sample trajectories of length {self.sub_seq_len} along dimension {dim} given "
                               f"a tensordict of shape {tensordict.shape}. Consider reducing the sub_seq_len parameter "
                               "or increase sample length.")
        start_shape = list(shape)
        start_shape[dim] = 1
        device = tensordict.device or torch.device("cpu")
        mask = None
        if self.mask_key is not None:
            mask = tensordict.get(self.mask_key, None)
        if mask is None:
            starts = torch.randint(shape[dim] - self.sub_seq_len + 1, start_shape, device=device)
        else:
            if mask.shape != shape:
                raise ValueError(f"Expected a mask of the same shape as the tensordict. Got mask.shape={mask.shape} and "
                                 f"tensordict.shape={shape} instead.")
            lengths = mask.long().sum(dim, keepdim=True)
            if (lengths < self.sub_seq_len).any():
                raise RuntimeError(f"Cannot sample trajectories of length {self.sub_seq_len} when the minimum "
                                   f"trajectory length is {lengths.min()}.")
            room = lengths - self.sub_seq_len + 1
            starts = (torch.rand(start_shape, device=device) * room).long().clamp(max=room - 1)
        offsets = torch.arange(self.sub_seq_len, device=starts.device)
        offsets = offsets.view([self.sub_seq_len if d == dim % len(shape) else 1 for d in range(len(shape))])
        return tensordict.gather(dim=dim, index=starts + offsets)

    def _reset(self, tensordict, tensordict_reset):
        with missing_tolerance(self):
            return self.forward(tensordict_reset)
