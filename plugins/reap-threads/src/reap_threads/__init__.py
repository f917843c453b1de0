"""reap-threads: a thread-pool collector backend for reap (``backend="threads"``).

A plugin built only on reap's public hooks and API; see README.md ("writing a reap plugin").
"""

from reap_threads.collectors import ThreadAsyncCollector, ThreadSyncCollector, ThreadWorkerError
from reap_threads.weight_sync import ThreadWeightSyncScheme

__all__ = ["ThreadAsyncCollector", "ThreadSyncCollector", "ThreadWeightSyncScheme", "ThreadWorkerError"]
