import pytest
import torch

from reap import compile_with_warmup


def test_runs_eagerly_then_compiled(monkeypatch):
    compiled_calls = []

    def fake_compile(module, **kwargs):
        compiled_calls.append(kwargs)
        return lambda x: module(x) + 100

    monkeypatch.setattr(torch, "compile", fake_compile)
    f = compile_with_warmup(lambda x: x + 1, warmup=2, mode="reduce-overhead")
    assert [f(0), f(0), f(0), f(0)] == [1, 1, 101, 101]
    assert compiled_calls == [{"mode": "reduce-overhead"}]


def test_real_compile_matches_eager():
    module = torch.nn.Linear(3, 2)
    f = compile_with_warmup(module, warmup=1, backend="eager", fullgraph=True)
    x = torch.randn(4, 3)
    for _ in range(3):
        torch.testing.assert_close(f(x), module(x))
    assert f.compiled is not None and f.weight is module.weight


def test_bad_warmup():
    with pytest.raises(ValueError, match="warmup must be a non-negative int"):
        compile_with_warmup(torch.nn.Linear(1, 1), warmup=-1)
