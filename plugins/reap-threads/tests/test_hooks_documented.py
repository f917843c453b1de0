"""Every hook of ``reap.hookspecs`` is documented in this plugin's guide or in core's README:
a hook nobody can find is a hook nobody uses."""

import ast
import inspect
import re
from pathlib import Path

import reap.hookspecs

ROOT = Path(__file__).resolve().parents[3]
DOCS = [ROOT / "plugins" / "reap-threads" / "README.md", ROOT / "packages" / "core" / "README.md"]


def hookspec_names() -> list[str]:
    """The hook names, parsed from the source (functions decorated with ``@hookspec``)."""
    tree = ast.parse(inspect.getsource(reap.hookspecs))
    names = []
    for node in tree.body:
        if isinstance(node, ast.FunctionDef) and any(
                (d.func.id if isinstance(d, ast.Call) else getattr(d, "id", None)) == "hookspec"
                for d in node.decorator_list):
            names.append(node.name)
    return names


def test_hookspecs_are_parsed():
    names = hookspec_names()
    assert {"reap_register_collector_backends", "reap_rollout_start", "reap_plugin_report"} <= set(names)
    # every function the plugin manager knows as a hook was found, and nothing else
    assert set(names) == {n for n in dir(reap.hookspecs) if n.startswith("reap_")}


def test_every_hook_is_documented():
    text = "\n".join(path.read_text() for path in DOCS if path.exists())
    missing = [name for name in hookspec_names() if f"`{name}(" not in text and f"`{name}`" not in text]
    assert not missing, f"hooks documented nowhere (add them to plugins/reap-threads/README.md): {missing}"


def test_readme_example_runs():
    """The guide's ```python blocks run as written (```py blocks are excerpts)."""
    blocks = re.findall(r"```python\n(.*?)```", DOCS[0].read_text(), flags=re.S)
    assert blocks
    for i, block in enumerate(blocks):
        exec(compile(block, f"plugins/reap-threads/README.md python block {i}", "exec"), {})
