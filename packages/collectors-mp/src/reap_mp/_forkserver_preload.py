"""Imported once by the forkserver (see :func:`reap_mp._procs.get_context`): the worker code and
every installed reap plugin are loaded there, so each forked worker starts with them instead of
loading the plugins again (seconds per worker when reap-collectors-ray brings in Ray)."""

import reap_mp._worker  # noqa: F401
import reap_mp.parallel_env  # noqa: F401
from reap.plugins import get_registries

get_registries()
