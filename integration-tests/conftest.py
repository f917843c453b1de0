import importlib
from pathlib import Path

import pytest
import torch

EXAMPLES = Path(__file__).resolve().parents[1] / "examples"


@pytest.fixture
def run_example(monkeypatch):
    """``run_example("ppo_cartpole", *argv)``: the example's ``main(parse_args(argv))`` in the test's
    process, returning its summary. The example is imported by name from ``examples/`` (so that
    spawned workers can unpickle its classes); the torch thread count it sets is given back."""
    monkeypatch.syspath_prepend(str(EXAMPLES))

    def run(name: str, *argv: str) -> dict:
        example = importlib.import_module(name)
        threads = torch.get_num_threads()
        try:
            return example.main(example.parse_args(list(argv)))
        finally:
            torch.set_num_threads(threads)

    return run
