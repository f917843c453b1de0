import importlib
import sys
from pathlib import Path

import pytest
import torch

EXAMPLES = Path(__file__).resolve().parents[1] / "examples"
# The examples are importable by name for the whole session, from its start: worker processes
# unpickle the examples' classes by name, and a forkserver keeps the sys.path it was started with
# (the first forkserver collector of the session may come before any example test).
if str(EXAMPLES) not in sys.path:
    sys.path.insert(0, str(EXAMPLES))


@pytest.fixture
def run_example():
    """``run_example("ppo_cartpole", *argv)``: the example's ``main(parse_args(argv))`` in the test's
    process, returning its summary; the torch thread count the example sets is given back."""

    def run(name: str, *argv: str) -> dict:
        example = importlib.import_module(name)
        threads = torch.get_num_threads()
        try:
            return example.main(example.parse_args(list(argv)))
        finally:
            torch.set_num_threads(threads)

    return run
