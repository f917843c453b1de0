"""reap's specs against TorchRL 0.14's, side by side: every spec is built from both libraries
with the same arguments, every operation runs on both under the same seed, and the results
must agree: equal tensors, TensorDicts and NumPy arrays, specs with TorchRL's ``repr``, the
same exception class."""

import numpy as np
import pytest
import torch
from tensordict import TensorDictBase

import reap.specs as ours_module

theirs_module = pytest.importorskip("torchrl.data")

SPECS = {
    "unbounded": lambda m: m.Unbounded(shape=(2, 3)),
    "unbounded-default": lambda m: m.Unbounded(),
    "unbounded-int": lambda m: m.Unbounded(shape=(2,), dtype=torch.int64),
    "unbounded-discrete": lambda m: m.UnboundedDiscrete(shape=(3, 1)),
    "bounded": lambda m: m.Bounded(-1.0, 2.0, shape=(2, 3)),
    "bounded-tensors": lambda m: m.Bounded(torch.tensor([-1.0, 0.0, 1.0]), torch.tensor([1.0, 2.0, 3.0])),
    "bounded-int": lambda m: m.Bounded(-5, 5, shape=(4, 2), dtype=torch.int64),
    "bounded-int32": lambda m: m.Bounded(0, 9, shape=(3,), dtype=torch.int32),
    "bounded-double": lambda m: m.Bounded(-1.0, 1.0, shape=(2, 1), dtype=torch.float64),
    "bounded-continuous": lambda m: m.BoundedContinuous(0.0, 1.0, shape=(2,)),
    "categorical": lambda m: m.Categorical(5),
    "categorical-batched": lambda m: m.Categorical(4, shape=(3, 2)),
    "categorical-masked": lambda m: m.Categorical(4, shape=(2,), mask=torch.tensor([[True, False, True, False],
                                                                                    [False, True, True, True]])),
    "onehot": lambda m: m.OneHot(4),
    "onehot-batched": lambda m: m.OneHot(3, shape=(2, 3), dtype=torch.int64),
    "onehot-masked": lambda m: m.OneHot(4, shape=(2, 4), mask=torch.tensor([True, False, True, True])),
    "binary": lambda m: m.Binary(4),
    "binary-batched": lambda m: m.Binary(n=3, shape=(2, 3), dtype=torch.bool),
    "multionehot": lambda m: m.MultiOneHot([2, 3, 4]),
    "multionehot-batched": lambda m: m.MultiOneHot([2, 3], shape=(3, 5), dtype=torch.int64),
    "multicategorical": lambda m: m.MultiCategorical([3, 4, 5]),
    "multicategorical-batched": lambda m: m.MultiCategorical([2, 5], shape=(3, 2)),
    "multicategorical-one": lambda m: m.MultiCategorical([6]),
    "multionehot-masked": lambda m: m.MultiOneHot([2, 3], shape=(2, 5), mask=torch.tensor(
        [[True, False, False, True, True], [True, True, True, False, True]])),
    "multicategorical-masked": lambda m: m.MultiCategorical([2, 3], shape=(2, 2), mask=torch.tensor(
        [[True, False, False, True, True], [False, True, True, True, False]])),
    "unbounded-dynamic": lambda m: m.Unbounded(shape=(-1, 1, 2)),
    "bounded-dynamic": lambda m: m.Bounded(-1.0, 1.0, shape=(-1, 2)),
    "composite": lambda m: m.Composite(obs=m.Bounded(-1.0, 1.0, shape=(2, 3)), act=m.Categorical(3, shape=(2,)),
                                       shape=(2,)),
    "composite-named": lambda m: m.Composite(obs=m.Unbounded(shape=(2, 3, 1)), sub=m.Composite(
        a=m.Unbounded(shape=(2, 3, 2)), shape=(2, 3)), shape=(2, 3), names=["batch", "time"]),
    "composite-dynamic": lambda m: m.Composite(a=m.Unbounded(shape=(-1, 2)), shape=(-1,)),
    "composite-nested": lambda m: m.Composite(
        {"a": m.Unbounded(shape=(2, 1)), ("b", "c"): m.OneHot(3, shape=(2, 3)),
         ("b", "d", "e"): m.Binary(2, shape=(2, 2))}, shape=(2,)),
    "composite-empty": lambda m: m.Composite(shape=(3,)),
    "composite-none": lambda m: m.Composite(a=m.Unbounded(shape=(1,)), b=None),
}


def _value(spec, m):
    return spec.zero()


OPS = {
    "repr": lambda s, m: s,
    "rand": lambda s, m: s.rand(),
    "rand-shape": lambda s, m: s.rand((2,)),
    "zero": lambda s, m: s.zero(),
    "zero-shape": lambda s, m: s.zero((3, 1)),
    "one": lambda s, m: s.one(),
    "is_in-rand": lambda s, m: s.is_in(s.rand()),
    "is_in-rand-shape": lambda s, m: s.is_in(s.rand((2,))),
    "is_in-zero": lambda s, m: s.is_in(s.zero()),
    "project-rand": lambda s, m: s.project(s.rand()),
    "clone": lambda s, m: s.clone(),
    "clone-is-not": lambda s, m: s.clone() is s,
    "to-cpu": lambda s, m: s.to("cpu"),
    "to-float64": lambda s, m: s.to(torch.float64),
    "expand": lambda s, m: s.expand(4, *s.shape),
    "expand-tuple": lambda s, m: s.expand((2, 3, *s.shape)),
    "unsqueeze0": lambda s, m: s.unsqueeze(0),
    "unsqueeze-1": lambda s, m: s.unsqueeze(-1),
    "squeeze": lambda s, m: s.squeeze(),
    "squeeze-after-unsqueeze": lambda s, m: s.unsqueeze(0).squeeze(0),
    "unbind0": lambda s, m: list(s.unbind(0)),
    "unbind-1": lambda s, m: list(s.unbind(-1)),
    "getitem0": lambda s, m: s[0],
    "getitem-slice": lambda s, m: s[:1],
    "getitem-ellipsis": lambda s, m: s[..., 0],
    "getitem-none": lambda s, m: s[None],
    "getitem-list": lambda s, m: s[[0, 1]],
    "getitem-tensor": lambda s, m: s[torch.tensor([1, 0])],
    "stack": lambda s, m: torch.stack([s, s.clone()], 0),
    "stack-last": lambda s, m: torch.stack([s, s.clone()], -1),
    "index_select": lambda s, m: torch.index_select(s, 0, torch.tensor([0])),
    "cardinality": lambda s, m: s.cardinality(),
    "enumerate": lambda s, m: s.enumerate(),
    "ndim": lambda s, m: (s.ndim, s.ndimension(), s.shape),
    "dtype-domain": lambda s, m: (getattr(s, "dtype", None), s.domain, type(s).__name__),
    "space": lambda s, m: repr(s.space),
    "to_numpy": lambda s, m: s.to_numpy(s.rand()),
    "encode-numpy": lambda s, m: s.encode(s.to_numpy(s.rand())),
    "reshape": lambda s, m: s.reshape(-1) if s.ndim == 2 else s.reshape(*s.shape),
    "flatten": lambda s, m: s.flatten(0, -1),
    "eq-self-clone": lambda s, m: s == s.clone(),
    "ne-unbounded": lambda s, m: s != m.Unbounded(shape=s.shape),
    "sample": lambda s, m: s.sample(),
    "contains": lambda s, m: s.contains(s.rand()),
    "names": lambda s, m: s.names if hasattr(s, "names") else None,
    "expand-names": lambda s, m: getattr(s.expand(4, *s.shape), "names", None),
    "unsqueeze-names": lambda s, m: getattr(s.unsqueeze(0), "names", None),
    "getitem0-names": lambda s, m: getattr(s[0], "names", None),
    "is_in-other-shape": lambda s, m: s.is_in(s.rand((3,))[0]),
    "project-masked": lambda s, m: s.project(s.zero()) if getattr(s, "mask", None) is not None else None,
    "getitem-negative-step": lambda s, m: s[10:0:-2] if s.ndim > 1 else None,
    "is_in-missing-key": lambda s, m: s.is_in(s.rand().exclude(next(iter(s.keys())))) if isinstance(
        s, m.Composite) and len(s.keys()) else None,
}


def run(fn, *args):
    try:
        return fn(*args)
    except Exception as exc:  # the outcome compared is the exception's class
        return exc


def assert_same(a, b, where):
    if isinstance(b, Exception):
        assert isinstance(a, Exception), f"{where}: TorchRL raises {b!r}, reap returns {a!r}"
        assert type(a).__name__ == type(b).__name__, f"{where}: reap raises {a!r}, TorchRL {b!r}"
        return
    assert not isinstance(a, Exception), f"{where}: reap raises {a!r}, TorchRL returns {type(b).__name__}"
    if isinstance(b, (list, tuple)):
        assert len(a) == len(b), where
        for x, y in zip(a, b):
            assert_same(x, y, where)
    elif isinstance(b, TensorDictBase):
        assert type(a).__name__ == type(b).__name__ and a.batch_size == b.batch_size, where
        assert sorted(a.keys(True, True), key=str) == sorted(b.keys(True, True), key=str), where
        for key in b.keys(True, True):
            assert_same(a.get(key), b.get(key), f"{where}[{key}]")
    elif isinstance(b, bool):  # is_in: a bool where TorchRL gives one, a 0-dim tensor where it does
        assert type(a) is bool and a == b, f"{where}: {a!r} != {b!r}"
    elif ".eq-" in where and isinstance(b, torch.Tensor) and not b.ndim:  # TorchRL's == of masks: a tensor
        assert type(a) is bool and a == bool(b), f"{where}: {a!r} != {b!r}"
    elif isinstance(b, torch.Tensor):
        assert isinstance(a, torch.Tensor), where
        assert (a.shape, a.dtype, a.device, a.is_nested) == (b.shape, b.dtype, b.device, b.is_nested), where
        assert torch.equal(a, b), f"{where}: {a} != {b}"
    elif isinstance(b, dict):
        assert sorted(a) == sorted(b), where
        for key in b:
            assert_same(a[key], b[key], f"{where}[{key}]")
    elif isinstance(b, np.ndarray):
        assert a.dtype == b.dtype and a.shape == b.shape and (a == b).all(), where
    elif isinstance(b, theirs_module.TensorSpec):
        assert repr(a) == repr(b), f"{where}:\n{a!r}\n!=\n{b!r}"
        assert a == b, where
    else:
        assert a == b, f"{where}: {a!r} != {b!r}"


#: Where TorchRL fails (or loses data) by accident, reap gives the plain result.
TORCHRL_FAILS = {
    ("categorical-masked", "squeeze"): "TorchRL views the mask with shape None",
    ("onehot-masked", "getitem-ellipsis"): "TorchRL indexes the mask's one-hot dim",
    ("multicategorical", "unbind0"): "TorchRL unbinds nvec into scalars it cannot take back",
    ("multicategorical-one", "unbind0"): "the same",
    ("multicategorical-batched", "flatten"): "TorchRL keeps the unflattened nvec",
    ("composite-none", "squeeze-after-unsqueeze"): "TorchRL calls None.squeeze",
    ("multionehot-masked", "to-float64"): "TorchRL casts the mask to the new dtype, then refuses it",
    ("multicategorical-masked", "to-float64"): "the same",
    ("composite-named", "rand-shape"): "TorchRL keeps the names of the batch without the new dims",
    ("composite-named", "is_in-rand-shape"): "the same",
    ("composite-named", "is_in-other-shape"): "the same",
    ("composite-named", "getitem-none"): "TorchRL keeps the names of the dims before the new one",
    ("unbounded-dynamic", "flatten"): "TorchRL builds a tensor of the -1 dim",
    ("bounded-dynamic", "flatten"): "the same",
    ("composite-dynamic", "flatten"): "the same",
    ("composite-dynamic", "encode-numpy"): "TorchRL reshapes the value to the -1 dim",
    ("composite-named", "zero-shape"): "TorchRL keeps the names of the batch without the new dims",
    **{(name, "getitem-negative-step"): "TorchRL indexes the spec's tensors with the negative step, which torch "
       "refuses" for name in ("bounded", "bounded-int", "bounded-double", "onehot-masked",
                              "multicategorical-batched", "multicategorical-masked")},
}
#: An index of a dim of unknown size (-1): TorchRL passes a list or tensor unchecked, reap refuses it.
DYNAMIC_UNCHECKED = {"getitem-list", "getitem-tensor"}
#: reap refuses to unbind a dim of unknown size (-1); TorchRL gives one spec or none, by class.
REAP_REFUSES = {("bounded-dynamic", "unbind0"), ("unbounded-dynamic", "unbind0"), ("composite-dynamic", "unbind0"),
                ("composite-dynamic", "unbind-1")}
MASKED = {"categorical-masked", "multionehot-masked", "multicategorical-masked"}
#: Both raise, TorchRL by accident (None.unbind), reap naming the dim.
BOTH_RAISE = {("composite-none", "unbind0"), ("multicategorical-masked", "reshape"),
              ("bounded-dynamic", "getitem-list"), ("bounded-dynamic", "getitem-tensor")}
#: TorchRL drops a Categorical's mask when it expands, indexes, stacks, reshapes or moves it.
MASK_KEPT = {"to-float64", "expand", "expand-tuple", "getitem0", "getitem-slice", "getitem-ellipsis",
             "getitem-none", "getitem-list", "getitem-tensor", "stack", "stack-last", "reshape", "flatten"}


def outcomes(name, op):
    results = []
    for module in (ours_module, theirs_module):
        spec = SPECS[name](module)
        torch.manual_seed(0)
        results.append(run(OPS[op], spec, module))
    return results


def check(name, op):
    ours, theirs = outcomes(name, op)
    if (name, op) in BOTH_RAISE:
        assert isinstance(theirs, Exception) and isinstance(ours, Exception), (name, op)
    elif (name, op) in TORCHRL_FAILS:
        assert isinstance(theirs, Exception) and not isinstance(ours, Exception), (name, op)
    elif (name, op) in REAP_REFUSES:
        assert isinstance(ours, ValueError) and not isinstance(theirs, Exception), (name, op)
    elif name.endswith("-dynamic") and op in DYNAMIC_UNCHECKED:
        assert isinstance(ours, IndexError) and not isinstance(theirs, Exception), (name, op)
    elif name in MASKED and getattr(theirs, "mask", 0) is None:  # TorchRL dropped the mask
        assert all(s.mask is not None for s in (ours if isinstance(ours, list) else [ours])), op
        assert op in MASK_KEPT or name != "categorical-masked", op
    elif name == "composite-nested" and op == "one":  # TorchRL's adds 1 to bools: int64 ones
        assert ours["b", "c"].dtype == torch.bool and theirs["b", "c"].dtype == torch.int64
    else:
        assert_same(ours, theirs, f"{name}.{op}")


@pytest.mark.parametrize("name", list(SPECS))
def test_spec_operations_match_torchrl(name):
    failures = []
    for op in OPS:
        try:
            check(name, op)
        except AssertionError as exc:
            failures.append(f"{op}: {str(exc)[:500]}")
    assert not failures, "\n".join(failures)


def test_bounded_rand_of_wide_integer_ranges_matches_torchrl():
    for low, high, dtype in [(-(2**62), 2**62, torch.int64), (0, 2**31 - 2, torch.int32), (-3, 3, torch.int8)]:
        outs = []
        for module in (ours_module, theirs_module):
            torch.manual_seed(1)
            outs.append(module.Bounded(low, high, shape=(100,), dtype=dtype).rand())
        assert torch.equal(*outs)
