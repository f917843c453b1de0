"""Multi-process sync and async collectors over shared memory."""
