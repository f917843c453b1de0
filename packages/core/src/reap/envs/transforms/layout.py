"""The step arrays of a ``TransformedEnv``: which array each key of each stage of the chain is.

Every entry that exists at some point of the chain is one array, allocated once with the batch.
Stage 0 is the base env; stage j is what transform j leaves. The specs of each stage are TorchRL's
output spec (observations, reward, done flags) and input spec (action, state), as the
transforms' spec hooks make them; the root arrays hold the observations, flags, state and action,
the ``"next"`` arrays the observations, reward and flags. An entry a transform keeps (same spec,
or a ``key_moves()`` rename) stays the same array; one it replaces or adds is a new array. Each
array is named after the key it finally shows; one that is excluded or replaced gets a hidden
name (``"_hidden:..."``), which batches and TensorDicts leave out. The observations of every stage
and state are carried from ``"next"`` to the next step's root.

Examples:
    >>> from reap.envs import GymEnv
    >>> from reap.envs.transforms import CatFrames, TransformedEnv
    >>> env = TransformedEnv(GymEnv("Pendulum-v1"), CatFrames(N=2, dim=-1, in_keys=["observation"]))
    >>> sorted(env.root_specs())  # the stacked observation, and the env's own one, hidden
    ['_hidden:0:observation', 'action', 'done', 'observation', 'terminated', 'truncated']
"""

from __future__ import annotations

from reap.envs.base import FLAG_KEYS, HIDDEN_PREFIX


def leaves(spec) -> dict:
    """The leaf specs of a Composite (nested keys as tuples); ``{}`` for None."""
    return {} if spec is None else dict(spec.items(True, True))


def categories(output_spec, input_spec) -> dict[str, dict]:
    """TorchRL's spec categories as flat dicts of leaf specs."""
    return {
        "observation": leaves(output_spec["full_observation_spec"]),
        "reward": leaves(output_spec.get("full_reward_spec")),
        "done": leaves(output_spec.get("full_done_spec")),
        "action": leaves(input_spec["full_action_spec"]),
        "state": leaves(input_spec.get("full_state_spec")),
    }


def sides(cats: dict) -> tuple[dict, dict]:
    """The (root, next) leaf specs of a stage's categories."""
    root = {**cats["state"], **cats["observation"], **cats["done"], **cats["action"]}
    nxt = {**cats["observation"], **cats["reward"], **cats["done"]}
    return root, nxt


class Side:
    """The arrays of one side (root or next) across the transform chain."""

    def __init__(self, specs: dict):
        self.specs: list = []  # by array id
        self.origin: list[str] = []  # "<stage>:<key>" where each array was created
        self.stages: list[dict] = [{k: self._new(0, k, s) for k, s in specs.items()}]
        self.inputs: list[dict] = [{}]  # per stage: ("in", key) entries

    def _new(self, stage: int, key, spec) -> int:
        self.specs.append(spec)
        self.origin.append(f"{stage}:{key}")
        return len(self.specs) - 1

    def logical_specs(self) -> dict:
        return {k: self.specs[i] for k, i in self.stages[-1].items()}

    def add_stage(self, after: dict, moves: dict, replaced, reads) -> None:
        before, stage = self.stages[-1], len(self.stages)
        current, inputs = {}, {}
        for key, spec in after.items():
            if key in moves and moves[key] in before:
                current[key] = before[moves[key]]
            elif key in before and key not in replaced:
                current[key] = before[key]
            else:
                current[key] = self._new(stage, key, spec)
            self.specs[current[key]] = spec
        for key in reads:
            if key in before:
                inputs[("in", key)] = before[key]
        self.stages.append(current)
        self.inputs.append(inputs)

    def names(self) -> list:
        final = {i: k for k, i in self.stages[-1].items()}
        return [final.get(i, f"{HIDDEN_PREFIX}{self.origin[i]}") for i in range(len(self.specs))]

    def view(self, names: list, j: int, arrays: dict) -> dict:
        """Stage ``j``'s keys (and its ``("in", key)`` entries) mapped to ``arrays``."""
        view = {k: arrays[names[i]] for k, i in self.stages[j].items()}
        view.update({k: arrays[names[i]] for k, i in self.inputs[j].items()})
        return view


def _changed(before: dict, after: dict) -> tuple:
    """Keys of ``after`` whose shape or dtype differ from ``before``'s (a new array each)."""
    return tuple(k for k, s in after.items()
                 if k in before and (tuple(s.shape), s.dtype) != (tuple(before[k].shape), before[k].dtype))


class Layout:
    """The chain's stages and arrays (see the module docstring)."""

    def __init__(self, base):
        self.output_spec = base.output_spec.clone()
        self.input_spec = base.input_spec.clone()
        self.cats = categories(self.output_spec, self.input_spec)
        root, nxt = sides(self.cats)
        # arrays the base env has beyond its specs (a batch of transformed envs' bookkeeping)
        self.extra_root = {k: v for k, v in base.root_specs().items() if k not in root}
        self.extra_next = {k: v for k, v in base.next_specs().items() if k not in nxt}
        self.root = Side({**root, **self.extra_root})
        self.next = Side({**nxt, **self.extra_next})
        self.carried = [(0, k) for k in base.state_keys]
        self.base_actions = list(self.cats["action"])
        self.passthrough = list(base.passthrough_keys)
        self.base_action_key = base.action_key if len(base.action_keys) == 1 else None
        self.finish()

    def add(self, transform, output_spec, input_spec, on_arrays: bool) -> None:
        """Add the stage of ``transform`` given the specs it leaves."""
        name = type(transform).__name__
        cats = categories(output_spec, input_spec)
        root_after, next_after = sides(cats)
        root_after.update(self.extra_root)
        next_after.update(self.extra_next)
        root_before, next_before = self.root.logical_specs(), self.next.logical_specs()
        # state carried in "next" before stays there, as TorchRL's step_mdp carries it
        next_after.update({k: v for k, v in cats["state"].items() if k not in next_after and k in next_before})
        if on_arrays:
            moves, reads = transform.key_moves(), tuple(transform.reads_inputs())
            replaced = tuple(transform.replaced_keys())
            replaced = ((*replaced, *transform.replaced_inputs()), replaced)
        else:  # TorchRL's hooks read everything before them; an entry they reshape is a new array
            moves, reads = {}, (*root_before, *next_before)
            replaced = (_changed(root_before, root_after), _changed(next_before, next_after))
        for key in FLAG_KEYS:
            if key in next_before and (key not in next_after or key in moves.values() or key in replaced[1]):
                raise ValueError(f"{name}: the done flags ({', '.join(FLAG_KEYS)}) must stay as they are (the "
                                 "collector reads them); write what the transform makes of them under another "
                                 "key (out_keys)")
        self.root.add_stage(root_after, moves, replaced[0], reads)
        self.next.add_stage(next_after, moves, replaced[1], reads)
        self.output_spec, self.input_spec, self.cats = output_spec, input_spec, cats
        stage = len(self.root.stages) - 1
        self.carried.extend((stage, k) for k in (*cats["observation"], *cats["state"]))
        self.passthrough.extend(k for k in transform.passthrough_keys() if k not in self.passthrough)
        self.finish()

    def finish(self) -> None:
        self.root_names, self.next_names = self.root.names(), self.next.names()
        self.root_specs = dict(zip(self.root_names, self.root.specs))
        self.next_specs = dict(zip(self.next_names, self.next.specs))
        carried = []
        for stage, key in self.carried:
            root_id, next_id = self.root.stages[stage].get(key), self.next.stages[stage].get(key)
            if root_id is None or next_id is None:
                continue
            root_name, next_name = self.root_names[root_id], self.next_names[next_id]
            if root_name != next_name:
                raise ValueError(f"TransformedEnv: the carried entry {key!r} is shown as {root_name!r} on the "
                                 f"root but {next_name!r} in 'next'; rename or exclude it on both sides")
            if root_name not in carried:
                carried.append(root_name)
        self.state_keys = tuple(carried)
        self.identity = [
            not self.root.inputs[j] and not self.next.inputs[j]
            and all(self.root_names[i] == k for k, i in self.root.stages[j].items())
            and all(self.next_names[i] == k for k, i in self.next.stages[j].items())
            for j in range(len(self.root.stages))
        ]
        base_actions = [self.root_names[i] for k, i in self.root.stages[0].items() if k in self.base_actions]
        self.action_is_base = base_actions == list(self.cats["action"])

    def stage_keys(self, j: int) -> tuple:
        """The (root, next) keys of stage ``j``."""
        return tuple(self.root.stages[j]), tuple(self.next.stages[j])

    def views(self, root: dict, nxt: dict | None) -> list:
        """Per stage, the (root, next) dicts under that stage's keys."""
        views = []
        for j, identity in enumerate(self.identity):
            if identity:
                views.append((root, nxt))
                continue
            r = self.root.view(self.root_names, j, root)
            x = None if nxt is None else self.next.view(self.next_names, j, nxt)
            views.append((r, x))
        return views
