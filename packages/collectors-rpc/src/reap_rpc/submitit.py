"""``launcher="submitit"``: one SLURM job (or a local process, with submitit's local executor)
per worker, each running :func:`reap_rpc._worker.worker_main` on the specification it is given.

``slurm_kwargs`` are the executor's parameters (``timeout_min``, ``slurm_partition``, ...);
``slurm_kwargs={"executor": "local"}`` runs the jobs as local processes (for tests). The driver
listens on ``master_addr`` (required for real clusters: the address the nodes reach it at).
"""

from __future__ import annotations


def start_submitit(collector, tcp_port) -> None:
    try:
        import submitit
    except ImportError:
        raise ImportError("launcher='submitit' needs submitit: install reap-collectors-rpc[submitit] "
                          "(`uv pip install submitit`)") from None
    kwargs = dict(collector.slurm_kwargs or {})
    kind = kwargs.pop("executor", "slurm")
    folder = kwargs.pop("folder", "reap_submitit_logs")
    if kind == "local":
        executor = submitit.LocalExecutor(folder=folder)
    elif kind == "slurm":
        if collector.master_addr is None:
            raise ValueError(f"{collector._owner}: launcher='submitit' on SLURM needs master_addr= (the address "
                             "the nodes reach this driver at)")
        executor = submitit.AutoExecutor(folder=folder)
    else:
        raise ValueError(f"{collector._owner}: slurm_kwargs['executor'] must be 'slurm' or 'local', got {kind!r}")
    executor.update_parameters(**kwargs)
    collector._local = kind == "local" and collector.master_addr is None
    collector._open_store(collector._host, tcp_port or 0)
    from reap_rpc._worker import worker_main

    collector._jobs = [executor.submit(worker_main, collector._worker_spec(i))
                       for i in range(collector.num_collectors)]
    collector._connect()


def stop_jobs(jobs, grace: float) -> None:
    """Wait up to ``grace`` s for the jobs to end (the workers were told to leave), then cancel
    those still running."""
    import time

    deadline = time.monotonic() + grace
    for job in jobs:
        while not job.done() and time.monotonic() < deadline:
            time.sleep(0.1)
        if not job.done():
            job.cancel(check=False)
