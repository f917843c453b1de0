import pytest

from reap_replay import checkpoint as ckpt


@pytest.fixture
def dumps_crashing_at(monkeypatch):
    """``run(rb, path, step)``: ``rb.dumps(path)`` interrupted (KeyboardInterrupt) at ``step``,
    one of the checkpoint writer's named steps (``ckpt._hook``); the hook is removed after."""

    def run(rb, path, step: str) -> None:
        def crash(name):
            if name == step:
                raise KeyboardInterrupt(f"simulated crash at {name}")

        with monkeypatch.context() as patched:
            patched.setattr(ckpt, "_hook", crash)
            with pytest.raises(KeyboardInterrupt, match=step):
                rb.dumps(path)

    return run
