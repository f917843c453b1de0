"""Tensor specs: shape, dtype and domain of what an environment reads and writes (TorchRL's).

The classes, constructors and methods are TorchRL 0.14's (``Unbounded``, ``Bounded``,
``Categorical``, ``OneHot``, ``Binary``, ``MultiOneHot``, ``MultiCategorical``, ``NonTensor``,
``Composite`` with nested keys, ``Choice``, and the lazy ``Stacked``/``StackedComposite``), as are
their values: the same seed
draws the same ``rand()``. Shapes include the environment's batch dimensions.

Examples:
    >>> import torch
    >>> from reap.specs import Bounded, Composite, OneHot
    >>> spec = Bounded(low=-2.0, high=2.0, shape=(1,))
    >>> spec.is_in(spec.rand()), spec.space.high
    (tensor(True), tensor([2.]))
    >>> OneHot(3).to_categorical(torch.tensor([False, False, True]))
    tensor(2)
    >>> Composite({("agent", "action"): OneHot(3)})["agent", "action"].n
    3

Once TorchRL is imported, its type checks take these specs as its own (:mod:`reap.specs_torchrl`):
``QValueModule(spec=env.action_spec)``, ``DQNLoss(action_space=env.action_spec)`` or
``SafeModule(..., spec=env.action_spec, safe=True)`` need no conversion. ``spec.to_torchrl()``
gives TorchRL's own spec where one is wanted.
"""

from reap.specs.base import (
    BinaryBox,
    Box,
    BoxList,
    CategoricalBox,
    ContinuousBox,
    DiscreteBox,
    TensorSpec,
    implements_for_spec,
)
from reap.specs.choice import Choice
from reap.specs.composite import Composite
from reap.specs.continuous import (
    Bounded,
    BoundedContinuous,
    BoundedDiscrete,
    Unbounded,
    UnboundedContinuous,
    UnboundedDiscrete,
)
from reap.specs.discrete import Binary, Categorical, MultiCategorical, MultiOneHot, OneHot
from reap.specs.non_tensor import NonTensor
from reap.specs.stacked import Stacked, StackedComposite

__all__ = [
    "Binary", "BinaryBox", "Bounded", "BoundedContinuous", "BoundedDiscrete", "Box", "BoxList", "Categorical",
    "CategoricalBox", "Choice", "Composite", "ContinuousBox", "DiscreteBox", "MultiCategorical", "MultiOneHot",
    "NonTensor", "OneHot",
    "Stacked", "StackedComposite", "TensorSpec", "Unbounded", "UnboundedContinuous", "UnboundedDiscrete",
    "implements_for_spec",
]
