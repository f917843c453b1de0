"""TorchRL's other names of ``dumps`` and ``loads``."""


class DumpsAliases:
    """``save`` and ``dump`` call ``dumps``; ``load`` calls ``loads`` (TorchRL's aliases)."""

    def save(self, *args, **kwargs) -> None:
        """Alias of ``dumps``."""
        self.dumps(*args, **kwargs)

    def dump(self, *args, **kwargs) -> None:
        """Alias of ``dumps``."""
        self.dumps(*args, **kwargs)

    def load(self, *args, **kwargs) -> None:
        """Alias of ``loads``."""
        self.loads(*args, **kwargs)
