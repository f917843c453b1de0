"""Done flags as TorchRL handles them: completing a done spec, filling missing flags, finding
the envs that are done, and merging a partial reset into the data it resets.

Examples:
    >>> import torch
    >>> from tensordict import TensorDict
    >>> from reap.envs.done import update_during_reset
    >>> data = TensorDict({"obs": torch.tensor([[1.0], [2.0]]), "_reset": torch.tensor([[True], [False]])}, [2])
    >>> update_during_reset(TensorDict({"obs": torch.zeros(2, 1)}, [2]), data, ["_reset"])["obs"].flatten()
    tensor([0., 2.])
"""

from __future__ import annotations

import torch
from tensordict import TensorDictBase
from tensordict.utils import unravel_key

from reap.specs import Categorical, Composite


def replace_last(key, new: str):
    """``key`` with its last part replaced: ``("a", "done")`` -> ``("a", new)``, ``"done"`` -> ``new``."""
    return new if isinstance(key, str) else (*key[:-1], new)


def repr_by_depth(key):
    """Sort key of TorchRL's key lists: the top-level keys first, then by name."""
    key = unravel_key(key)
    return (0, key) if isinstance(key, str) else (len(key) - 1, ".".join(key))


def default_done_spec(shape, device=None) -> Categorical:
    return Categorical(2, shape=(*shape, 1), dtype=torch.bool, device=device)


def complete_done_spec(spec: Composite, device=None) -> None:
    """TorchRL's completion, in place: ``terminated`` copies ``done`` (and the reverse) where one is
    missing, an empty group gets both, and the flags of a group share one shape."""
    leaves = [(k, v) for k, v in spec.items() if not isinstance(v, Composite)]
    names = {k for k, _ in leaves}
    shape = None
    for key, item in leaves:
        if key == "done" and "terminated" not in names:
            spec["terminated"] = item.clone()
        elif key == "terminated" and "done" not in names:
            spec["done"] = item.clone()
        elif shape is None:
            shape = item.shape
        elif item is not None and shape != item.shape:
            raise ValueError(f"All shapes should match in done_spec {spec} (shape={shape}, key={key}).")
    for item in spec.values():
        if isinstance(item, Composite):
            complete_done_spec(item, device)
    if spec.is_empty():
        spec["done"] = default_done_spec(spec.shape, device)
        spec["terminated"] = default_done_spec(spec.shape, device)


def complete_done(done_spec: Composite, data: TensorDictBase) -> TensorDictBase:
    """``data`` (an env's output) with every flag of ``done_spec``: ``terminated`` from ``done``,
    ``done`` from ``terminated | truncated``, the others False (TorchRL's ``_complete_done``)."""
    lead = data.shape[: data.ndim - done_spec.ndim] if done_spec.ndim else data.shape
    values = {}
    leaves = 0
    for key, item in done_spec.items():
        value = data.get(key, None)
        if isinstance(item, Composite):
            if value is not None:
                complete_done(item, value)
            continue
        leaves += 1
        if value is not None:
            shape = (*lead, *item.shape)
            if value.dtype is not torch.bool and item.dtype is torch.bool:  # a float flag (EnvSpecs._settle_top_flags)
                value = value != 0
                data.set(key, value)
            if value.shape != shape:
                value = value.reshape(shape)
                data.set(key, value)
            values[key] = value
    if len(values) < leaves:
        present, names = set(data.keys()), set(done_spec.keys())
        for key, item in done_spec.items(False, True):
            value = values.get(key)
            if key == "done" and value is not None and "terminated" in names and "terminated" not in present:
                if "truncated" in present:
                    raise RuntimeError("Cannot infer the value of terminated when only done and truncated are present.")
                data.set("terminated", value)
                present.add("terminated")
            elif key == "terminated" and value is not None and "done" in names and "done" not in present:
                if "truncated" in present:
                    value = value | data.get("truncated")
                data.set("done", value)
                present.add("done")
            elif value is None and key not in present:
                data.set(key, item.zero(lead))
    return data


def any_done(data: TensorDictBase, done_spec: Composite | None, key: str | None = "_reset",
             write_full_false: bool = False) -> bool:
    """Whether any env of ``data`` is done by the flags of ``done_spec`` (None: every ``"done"``,
    ``"terminated"`` and ``"truncated"`` entry of ``data``); with ``key``, each done group gets
    that entry (``"_reset"``: the envs to reset), removed again when nothing is done unless
    ``write_full_false`` (TorchRL's ``_terminated_or_truncated``)."""
    written = []

    def visit(node, spec, path) -> bool:
        found, aggregate, leaves, groups = False, None, 0, {}
        items = node.items() if spec is None else spec.items()
        for name, item in items:
            nested = isinstance(item, Composite) if spec is not None else isinstance(item, TensorDictBase)
            if nested:
                groups[name] = item if spec is not None else None
                continue
            if spec is None and name not in ("done", "terminated", "truncated"):
                continue
            leaves += 1
            flag = node.get(name, None)
            if flag is None:
                flag = torch.zeros((*node.shape, 1), dtype=torch.bool, device=node.device)
            aggregate = flag if aggregate is None else aggregate | flag
        for name, sub_spec in groups.items():
            sub = visit(node.get(name), sub_spec, (*path, name))
            found = found or (sub if not leaves else False)
        if aggregate is not None:
            if key is not None:
                node.set(key, aggregate)
                written.append((*path, key))
            found = found or bool(aggregate.any())
        return found

    found = visit(data, done_spec, ())
    if not found and not write_full_false and written:
        data.exclude(*written, inplace=True)
    return found


def update_during_reset(reset: TensorDictBase, data: TensorDictBase, reset_keys: list) -> TensorDictBase:
    """``data`` updated in place with ``reset`` (an env's reset output) where its ``_reset``
    entries are True (all of it without them); the ``_reset`` entries are removed."""
    if not reset_keys:
        return data.update(reset)
    roots = set()
    for reset_key in reset_keys:
        path = reset_key[:-1] if isinstance(reset_key, tuple) else ()
        node_reset = reset.get(path) if path else reset.exclude(reset_key)
        node = data.get(path) if path else data
        mask = data.pop(reset_key, None)
        done_already = any(tuple(path[: len(r)]) == r for r in roots)
        roots.add(path)
        if done_already:
            continue
        if mask is None or mask.all():
            node.update(node_reset, update_batch_size=True)
            continue
        if mask.ndim > node.ndim:
            mask = mask.flatten(node.ndim, mask.ndim - 1).any(-1)
        node.where(~mask.reshape(node.shape), other=node_reset, out=node, pad=0, update_batch_size=True)
    return data
