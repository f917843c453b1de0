"""Recurrent backends: ``"pad"``, ``"scan"`` and ``"triton"``, registered through reap's hooks."""
