"""Where a sweep's seeds run: this process, local worker processes (``--jobs N``), or Ray tasks (``--ray``).

Every backend takes the plan's task list and calls ``on_row(index, row)`` exactly once per task, in
whatever order they finish (the report puts them back in plan order, so it is the same for every
backend). Work goes out in small batches of consecutive seeds: a seed of a small scenario takes
milliseconds, less than a round trip to a worker.

Local processes use a ``forkserver`` context (``spawn`` where there is none): a worker never forks a
parent that may run trio or hold threads, and the forkserver preloads the engine once, so a worker
starts in milliseconds. A worker that dies (killed, out of memory, ``os._exit`` in a policy) breaks the
pool; the pool is rebuilt and the seeds that were in flight are run again one at a time, so the seed
that kills its worker is found and becomes an ``error`` row, and the others complete.

Ray is an optional extra (``pip install 'warren-sim[ray]'``), imported only here and only when asked for.
``ray.init(address=None)`` starts a local Ray or joins ``RAY_ADDRESS`` when that is set; ``address``
joins a cluster. A Ray session the caller already started (a notebook, Ray Tune, a test) is used as is.
"""

from __future__ import annotations

import multiprocessing
import os
import sys
from collections import deque
from collections.abc import Callable, Sequence
from concurrent.futures import FIRST_COMPLETED, Future, ProcessPoolExecutor, wait
from concurrent.futures.process import BrokenProcessPool
from typing import Any

from .plan import SweepError
from .runs import Clock, Task, error_row, run_batch, run_task

OnRow = Callable[[int, dict[str, Any]], None]
WORKER_DIED = ("the worker process died while running this seed (killed, out of memory, or the policy "
               "ended the process)")


def default_jobs() -> int:
    """The cores this process may use (its CPU affinity where the OS tells), at least 1."""
    try:
        return max(1, len(os.sched_getaffinity(0)))
    except AttributeError:  # not on Linux
        return max(1, os.cpu_count() or 1)


def batches(indices: Sequence[int], workers: int, most: int = 16) -> list[list[int]]:
    """Consecutive indices in batches small enough that every worker gets about eight of them."""
    size = max(1, min(most, len(indices) // (workers * 8)))
    return [list(indices[i:i + size]) for i in range(0, len(indices), size)]


def run_tasks(tasks: Sequence[Task], on_row: OnRow, clock: Clock | None = None, *, backend: str = "local",
              jobs: int | None = None, address: str | None = None) -> None:
    """Every task on the chosen backend: Ray, this process (``jobs=1`` or a single task) or local workers."""
    if not tasks:
        return
    if backend == "ray":
        run_ray(tasks, on_row, clock, address)
    elif (jobs or default_jobs()) == 1 or len(tasks) == 1:
        run_serial(tasks, on_row, clock)
    else:
        run_local(tasks, on_row, clock, jobs)


def run_serial(tasks: Sequence[Task], on_row: OnRow, clock: Clock | None = None) -> None:
    """``--jobs 1``: every seed in this process, one after another."""
    for i, task in enumerate(tasks):
        on_row(i, run_task(task, clock))


# -- local worker processes ----------------------------------------------------------------------------
_worker_clock: Clock | None = None


def _init_worker(clock: Clock | None, cwd: str, path: list[str]) -> None:
    """Each worker works where the caller does: its directory (``--policy mymodule:factory`` finds
    ``./mymodule.py``) and import path, as they are now, not as they were when the forkserver started."""
    global _worker_clock
    _worker_clock = clock
    os.chdir(cwd)
    sys.path[:0] = [p for p in path if p not in sys.path]


def _work(tasks: list[Task]) -> list[dict[str, Any]]:
    return run_batch(tasks, _worker_clock)


def _ready() -> bool:
    return True


WORKERS_CANNOT_START = (
    "the sweep's worker processes could not start, so no seed ran{where}. Each worker imports the main "
    "module again; a script that calls evaluate() at its top level starts a sweep inside every worker. "
    "Put the call under a guard:\n\n    if __name__ == \"__main__\":\n        report = evaluate(...)\n\n"
    "(docs/evaluation.md), or pass jobs=1 to run every seed in this process.")


def _check_workers_start(pool: ProcessPoolExecutor) -> None:
    """Fail the sweep, loudly and with the fix, when its workers die before running anything.

    Without this, a worker that dies while bootstrapping (the classic: a script without the ``__main__``
    guard, which every forkserver or spawn worker re-runs) breaks the pool for every batch, each seed
    becomes an ``error`` row, and the report says 0.0 as if the seeds had run.
    """
    try:
        pool.submit(_ready).result()
    except BrokenProcessPool:
        main = getattr(sys.modules.get("__main__"), "__file__", None)
        raise SweepError(WORKERS_CANNOT_START.format(where=f" (main module: {main})" if main else "")) from None


def _context() -> multiprocessing.context.BaseContext:
    if "forkserver" in multiprocessing.get_all_start_methods():
        ctx = multiprocessing.get_context("forkserver")
        ctx.set_forkserver_preload(["warren_sim.evaluation.runs"])
        return ctx
    return multiprocessing.get_context("spawn")


def run_local(tasks: Sequence[Task], on_row: OnRow, clock: Clock | None = None, jobs: int | None = None) -> None:
    """``--jobs N``: N worker processes (default: this machine's cores)."""
    workers = max(1, min(jobs or default_jobs(), len(tasks)))
    todo = deque(batches(range(len(tasks)), workers))
    suspects: deque[int] = deque()  # seeds in flight when a worker died: rerun one at a time
    inflight: dict[Future[list[dict[str, Any]]], tuple[list[int], bool]] = {}

    def new_pool() -> ProcessPoolExecutor:
        return ProcessPoolExecutor(workers, mp_context=_context(), initializer=_init_worker,
                                   initargs=(clock, os.getcwd(), list(sys.path)))

    pool = new_pool()
    try:
        _check_workers_start(pool)
        while todo or suspects or inflight:
            if suspects:
                if not inflight:
                    i = suspects.popleft()
                    inflight[pool.submit(_work, [tasks[i]])] = ([i], True)
            else:
                while todo and len(inflight) < 2 * workers:
                    idx = todo.popleft()
                    inflight[pool.submit(_work, [tasks[i] for i in idx])] = (idx, False)
            done, _ = wait(list(inflight), return_when=FIRST_COMPLETED)
            if any(isinstance(f.exception(), BrokenProcessPool) for f in done):
                wait(list(inflight))  # a broken pool fails every pending future: collect them all
                done = set(inflight)
            broken = False
            for f in done:
                idx, alone = inflight.pop(f)
                exc = f.exception()
                if exc is None:
                    for i, row in zip(idx, f.result(), strict=True):
                        on_row(i, row)
                elif isinstance(exc, BrokenProcessPool):
                    broken = True
                    if alone:
                        on_row(idx[0], error_row(tasks[idx[0]], WORKER_DIED))
                    else:
                        suspects.extend(idx)
                else:  # a row that could not travel back (an unpicklable value): the seed's error, not the sweep's
                    for i in idx:
                        on_row(i, error_row(tasks[i], f"{type(exc).__name__}: {exc}"))
            if broken:
                pool.shutdown(wait=True)
                pool = new_pool()
    finally:
        pool.shutdown(wait=False, cancel_futures=True)


# -- Ray ----------------------------------------------------------------------------------------------------
def import_ray() -> Any:
    try:
        import ray
    except ImportError:
        raise SweepError("--ray needs Ray, an optional part of WARREN: pip install 'warren-sim[ray]'") from None
    return ray


def run_ray(tasks: Sequence[Task], on_row: OnRow, clock: Clock | None = None, address: str | None = None) -> None:
    """``--ray``: one Ray task per batch of seeds, on a local Ray or the cluster at ``address``."""
    ray = import_ray()
    started_here = False
    if not ray.is_initialized():
        options: dict[str, Any] = {"address": address, "include_dashboard": False, "log_to_driver": False}
        if address is None and not os.environ.get("RAY_ADDRESS"):
            # A local Ray: its workers see what this process sees (policy modules next to the user, the
            # scenario directories). A cluster needs them installed on its nodes (docs/evaluation.md).
            env = {"PYTHONPATH": os.pathsep.join([os.getcwd(), *[p for p in sys.path if p]])}
            if os.environ.get("WARREN_SCENARIOS"):
                env["WARREN_SCENARIOS"] = os.environ["WARREN_SCENARIOS"]
            options["runtime_env"] = {"env_vars": env}
        try:
            ray.init(**options)
        except (ConnectionError, ValueError, RuntimeError) as exc:
            raise SweepError(f"--ray: cannot start or join Ray at {address or os.environ.get('RAY_ADDRESS') or 'a new local instance'}: "
                             f"{exc}") from None
        started_here = True
    try:
        cpus = max(1, int(ray.cluster_resources().get("CPU", 1)))
        remote = ray.remote(num_cpus=1, max_retries=1)(run_batch)
        todo = deque(batches(range(len(tasks)), cpus))
        inflight: dict[Any, list[int]] = {}
        while todo or inflight:
            while todo and len(inflight) < 2 * cpus:
                idx = todo.popleft()
                inflight[remote.remote([tasks[i] for i in idx], clock)] = idx
            ready, _ = ray.wait(list(inflight), num_returns=1)
            for ref in ready:
                idx = inflight.pop(ref)
                try:
                    rows = ray.get(ref)
                except ray.exceptions.RayError as exc:  # the worker or its node was lost, after Ray's retry
                    if len(idx) > 1:  # find the seed that did it: the batch's seeds again, one task each
                        todo.extendleft([i] for i in reversed(idx))
                        continue
                    first = str(exc).strip().splitlines()[0] if str(exc).strip() else ""
                    on_row(idx[0], error_row(tasks[idx[0]], f"the Ray task died: {type(exc).__name__}: {first}"))
                else:
                    for i, row in zip(idx, rows, strict=True):
                        on_row(i, row)
    finally:
        if started_here:
            ray.shutdown()
