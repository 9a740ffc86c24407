"""Rank reports on a Dask cluster (`--dask-scheduler ADDRESS`, the optional `dask` extra).

The same pure function builds each rank as in the local process pool; each task writes its
`rank_N/` into the staging folder (so the workers must see the same filesystem, at the same
paths) and only the small `RankResult` comes back. Dask is imported here, and only when used.

A rank whose worker dies is submitted once more; if that worker dies too the rank is reported as
failed (its `RankResult.error`) and the other ranks' reports are kept. The scheduler's own
`distributed.scheduler.allowed-failures` may rerun a task before it tells us its worker died.
"""

from __future__ import annotations

import logging
import os
import sys
import threading
import uuid
from collections.abc import Callable
from pathlib import Path
from typing import Any, Protocol, TypeVar

from ..analysis.kinds import load_plugins

class _Job(Protocol):
    folder: str  # the rank's report folder, which names its task


# run.py's RankJob and RankResult; named only as type variables, since run.py imports this module
RankJob = TypeVar("RankJob", bound=_Job)
RankResult = TypeVar("RankResult")

CONNECT_TIMEOUT_S = 10.0  # how long to try reaching the scheduler before giving up (exit 2)
DEADLINE_GRACE_S = 1.0  # past the timeout, how long the attempt may take before it is abandoned
TIMEOUT_ENV = "TLPARSE_PY_DASK_CONNECT_TIMEOUT"  # seconds, instead of CONNECT_TIMEOUT_S
INSTALL = "pip install 'tlparse-py[dask]'"
ATTEMPTS = 2  # a rank whose worker died is retried once


class ClusterError(Exception):
    """The cluster cannot be used: one line for stderr and the exit code it means."""

    def __init__(self, message: str, exit_code: int = 2):
        super().__init__(message)
        self.exit_code = exit_code


def connect(address: str, timeout: float | None = None) -> Any:
    """A `distributed.Client` for the scheduler at `address`; ClusterError if it cannot be had."""
    try:
        from distributed import Client
    except ImportError:
        raise ClusterError(f"--dask-scheduler needs Dask distributed, which is not installed: {INSTALL}") from None
    from distributed.comm.addressing import parse_address, parse_host_port
    from distributed.comm.registry import get_backend

    try:  # a malformed address is refused here: a Client that fails on one hangs at exit
        scheme, location = parse_address(address)
        if scheme == "inproc":
            raise ValueError("inproc:// names a scheduler inside this same process")
        get_backend(scheme)
        if scheme in ("tcp", "tls", "ws", "wss"):
            parse_host_port(location)
    except ValueError as exc:
        raise ClusterError(f"--dask-scheduler {address}: not a scheduler address ({exc}); e.g. tcp://host:8786") from None
    seconds = connect_timeout() if timeout is None else timeout
    return _connect_within(Client, address, seconds)


def _connect_within(client_type: Any, address: str, seconds: float) -> Any:
    """A Client, or ClusterError once `seconds` (plus a moment) have passed. distributed's own
    timeout covers reaching the port, not a peer that accepts and never answers (or answers HTTP):
    the attempt runs in a daemon thread and is abandoned at the deadline, its goodbye unheard."""
    quiet = _Quiet()
    outcome: dict[str, Any] = {}

    def attempt() -> None:
        try:
            outcome["client"] = client_type(address, timeout=seconds, set_as_default=False)
        except BaseException as exc:  # noqa: BLE001 - refused, timed out, garbage answer: all one answer
            outcome["error"] = exc

    thread = threading.Thread(target=attempt, name="tlparse-py dask connect", daemon=True)
    thread.start()
    thread.join(seconds + DEADLINE_GRACE_S)
    try:
        if "client" in outcome:
            return outcome["client"]
        if thread.is_alive():
            reason = f"no answer in {seconds:g} s (is it a Dask scheduler?)"
        elif isinstance(outcome.get("error"), MemoryError):  # it read an answer's bytes as a huge frame length
            reason = "it answered, but not as a Dask scheduler"
        else:
            error = outcome.get("error")
            reason = " ".join(str(error).split()) or type(error).__name__
        raise ClusterError(f"cannot reach the Dask scheduler at {address}: {reason}")
    finally:
        quiet.restore()


def connect_timeout() -> float:
    text = os.environ.get(TIMEOUT_ENV, "")
    try:
        seconds = float(text) if text else CONNECT_TIMEOUT_S
    except ValueError:
        seconds = -1.0
    if not seconds > 0:
        raise ClusterError(f"{TIMEOUT_ENV}={text!r}: give a number of seconds above 0")
    return seconds


def close(client: Any) -> None:
    quiet = _Quiet()
    try:
        client.close()
    except Exception:  # noqa: BLE001 - the report is already decided; a failed goodbye changes nothing
        pass
    finally:
        quiet.restore()


def build_on_cluster(
    client: Any, build: Callable[[RankJob, Path], RankResult], jobs: list[RankJob], root: Path,
    done: Callable[[int, RankResult], None], died: Callable[[RankJob, str], RankResult],
) -> None:
    """Every job as a task; `done(index, result)` as each finishes (once per job). The workers' current
    folder is not ours: the jobs' log paths must be absolute."""
    from distributed import as_completed

    def submit(index: int) -> Any:
        job = jobs[index]
        return client.submit(_on_worker, build, job, root, key=f"tlparse-{job.folder}-{uuid.uuid4().hex}", pure=False)

    attempts: dict[Any, tuple[int, int]] = {}
    for index in range(len(jobs)):
        attempts[submit(index)] = (index, 1)
    pending = as_completed(list(attempts), loop=client.loop)
    try:
        for future in pending:
            index, attempt = attempts.pop(future)
            try:
                result = future.result()
            except Exception as exc:  # noqa: BLE001 - the worker died (KilledWorker) or the task was lost
                if client.status != "running":
                    raise ClusterError(f"lost the Dask scheduler at {client.scheduler.address} while building the ranks; nothing was written", 1) from None
                if attempt < ATTEMPTS:
                    retry = submit(index)
                    attempts[retry] = (index, attempt + 1)
                    pending.add(retry)
                    continue
                result = died(jobs[index], f"its Dask worker died {attempt} times while building this rank ({type(exc).__name__})")
            done(index, result)
    except BaseException:  # interrupted or lost: ranks not started yet are not started at all
        if client.status == "running":
            client.cancel(list(attempts))
        raise


def _on_worker(build: Callable[[RankJob, Path], RankResult], job: RankJob, root: Path) -> RankResult:
    """On a worker: the plugin kinds this process knows (once), then the rank."""
    load_plugins()
    return build(job, root)


class _Quiet:
    """distributed logs each connection retry and goodbye on stderr; the tool says one line itself."""

    NAMES = ("distributed", "distributed.client", "distributed.comm", "distributed.core", "distributed.batched")

    def __init__(self) -> None:
        self.levels = {name: logging.getLogger(name).level for name in self.NAMES}
        for name in self.NAMES:
            logging.getLogger(name).setLevel(logging.CRITICAL)
        # a Client that never connected says goodbye from __del__ with a traceback ("Exception
        # ignored in Client.__del__"): kept quiet for the rest of the process, as the failure is said
        sys.unraisablehook = _quiet_about_clients(sys.unraisablehook)

    def restore(self) -> None:
        for name, level in self.levels.items():
            logging.getLogger(name).setLevel(level)


def _quiet_about_clients(previous: Any) -> Any:
    if getattr(previous, "quiet_about_clients", False):
        return previous

    def hook(unraisable: Any) -> None:
        origin = getattr(getattr(unraisable, "object", None), "__qualname__", "")
        if not origin.startswith("Client."):
            previous(unraisable)

    hook.quiet_about_clients = True  # type: ignore[attr-defined]
    return hook
