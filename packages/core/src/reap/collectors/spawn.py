"""Workers that start from a fresh interpreter re-import the main script: the guard that explains
``if __name__ == "__main__":``, and how its explanation reaches the driver.

With ``spawn`` and ``forkserver`` every worker process imports the script that started it before
it runs anything else; a script that builds collectors outside the guard builds them again
there. :func:`check_main_guard` (called by every process backend as it is built) raises the
explanation in that worker. The worker cannot send it through its pipe (it receives the pipe only
after the import), so it also leaves the text in a folder the driver names in the environment
variable ``REAP_START_REPORTS`` (:func:`prepare_reports`, before its first worker or the
forkserver starts), under its process id; the driver reads it with :func:`start_report` when the
worker dies while starting, and removes the folder when it exits.

Examples:
    >>> from reap.collectors.spawn import check_main_guard, start_report
    >>> check_main_guard("MultiSyncCollector", "spawn")  # not a worker importing a script: nothing
    >>> start_report(2**31) is None
    True
"""

from __future__ import annotations

import atexit
import multiprocessing
import os
import shutil
import tempfile
import uuid

REPORTS_ENV = "REAP_START_REPORTS"

MAIN_GUARD_MESSAGE = (
    "{owner} was constructed while a child process started with the '{method}' start method was "
    "importing the main script. With 'spawn' (and 'forkserver') every worker re-imports the "
    "script that created it, so code that builds collectors or ParallelEnv must sit under\n\n"
    "    if __name__ == \"__main__\":\n        ...\n\n"
    "(or inside a function called from there).{hint}"
)

_folder: str | None = None  # this process's reports folder, once it named one


def prepare_reports() -> None:
    """Name this process's reports folder in ``REAP_START_REPORTS`` (once), for the workers it
    starts from now on. The folder is made only if a worker writes a report."""
    global _folder
    drop_unreadable_lazy_legacy()
    if _folder is not None:
        return
    _folder = os.path.join(tempfile.gettempdir(), f"reap-start-reports-{os.getpid()}-{uuid.uuid4().hex[:8]}")
    os.environ[REPORTS_ENV] = _folder  # a worker that starts workers of its own names its own
    atexit.register(shutil.rmtree, _folder, True)


def drop_unreadable_lazy_legacy() -> None:
    """Remove ``LAZY_LEGACY_OP=None`` from this process's environment before it starts workers.

    tensordict's ``set_lazy_legacy`` context (which its own ``torch.stack`` enters for some
    stacks) writes the mode it restores into ``os.environ`` as a string, ``"None"`` when none was
    set; a process started afterwards reads it back and fails in its first ``torch.stack``
    ("invalid truth value 'none'"). Unset is what ``"None"`` meant.
    """
    if os.environ.get("LAZY_LEGACY_OP") == "None":
        del os.environ["LAZY_LEGACY_OP"]


def check_main_guard(owner: str, method: str, hint: str = "") -> None:
    """Raise the explanation of the main guard if this process is a worker importing the main
    script (``method`` is how the worker was started), leaving it for the driver first."""
    if method == "fork" or not getattr(multiprocessing.current_process(), "_inheriting", False):
        return
    message = MAIN_GUARD_MESSAGE.format(owner=owner, method=method, hint=hint)
    folder = os.environ.get(REPORTS_ENV)
    if folder:
        try:
            os.makedirs(folder, exist_ok=True)
            path = os.path.join(folder, str(os.getpid()))
            with open(f"{path}.part", "w") as f:
                f.write(message)
            os.replace(f"{path}.part", path)  # the driver never reads half a report
        except OSError:
            pass  # the error below still says it in this worker's stderr
    raise RuntimeError(message)


def start_report(pid: int | None) -> str | None:
    """What worker ``pid`` left before it died while starting (removed once read), or None."""
    if _folder is None or pid is None:
        return None
    path = os.path.join(_folder, str(pid))
    try:
        with open(path) as f:
            text = f.read()
        os.remove(path)
    except OSError:
        return None
    return text


__all__ = [
    "MAIN_GUARD_MESSAGE", "REPORTS_ENV", "check_main_guard", "drop_unreadable_lazy_legacy", "prepare_reports", "start_report"]
