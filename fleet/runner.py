"""Run one piece of work per host, in parallel, with a bounded pool of workers.

A host that fails or cannot be reached never stops the others. Ctrl-C: no new host is started
and running hosts stop between tasks; a task in progress finishes, so a host whose `current`
switch has begun ends on the new runtime and one whose switch has not begun stays on the old.
A second Ctrl-C exits at once (130), naming the hosts it abandoned and the last task each
finished (a host that stopped answering is bounded anyway: fleet/connections/ssh.py).

Exit codes: 0 every host ok or changed; 2 a host failed; 4 a host was unreachable (a refused host
key counts as unreachable); 6 both (the bits add up, so a script can test either);
130 the run was interrupted.
"""

from __future__ import annotations

import os
import sys
import threading
from concurrent.futures import FIRST_COMPLETED, Future, ThreadPoolExecutor, wait
from typing import Callable, TextIO

from fleet.deploy import INTERRUPTED, UNREACHABLE, HostResult
from fleet.inventory import Host
from fleet.operations import CHANGED, FAILED, OK, SKIPPED
from fleet.roles import TaskReport

EXIT_OK, EXIT_FAILED, EXIT_UNREACHABLE, EXIT_INTERRUPTED = 0, 2, 4, 130

Work = Callable[[Host, Callable[[], bool]], HostResult]
SHOWN_SECONDS = 1.0  # a task that took this long says how long on its progress line


class Progress:
    """Live per-host lines, one per finished task, written whole under a lock."""

    def __init__(self, out: TextIO | None = None, show_diff: bool = False, verbose: bool = True):
        self.out = out or sys.stdout
        self.show_diff, self.verbose = show_diff, verbose
        self._lock = threading.Lock()
        self.last: dict[str, str] = {}  # host -> the last task it finished, for an abandoning Ctrl-C

    def line(self, text: str) -> None:
        with self._lock:
            print(text, file=self.out, flush=True)

    def task(self, host: str, report: TaskReport) -> None:
        o = report.outcome
        self.last[host] = f"{report.role} | {report.task}: {o.status}"
        if not self.verbose and o.status in (OK, SKIPPED):
            return
        status = "failed (ignored)" if report.ignored else o.status
        text = f"{host}: {report.role} | {report.task}: {status}"
        if o.message and o.status != OK:
            text += f" — {o.message.splitlines()[0][:300]}" if o.status != FAILED else \
                f" — {o.message[:2000]}"
        if report.seconds >= SHOWN_SECONDS:
            text += f" ({report.seconds:.1f} s)"
        if self.show_diff and o.diff:
            text += "\n" + o.diff.rstrip("\n")
        self.line(text)

    def host_done(self, r: HostResult) -> None:
        tail = f" — {r.message}" if r.message and r.status in (FAILED, UNREACHABLE) else ""
        self.line(f"{r.host}: {r.status.upper()} in {r.seconds:.1f} s{tail}")


def run_hosts(hosts: list[Host], work: Work, *, forks: int = 10,
              progress: Progress | None = None) -> tuple[list[HostResult], bool]:
    """Run `work(host, should_stop)` for every host; returns results in host order and whether
    the run was interrupted."""
    stop = threading.Event()
    results: dict[str, HostResult] = {}
    interrupted = False
    pool = ThreadPoolExecutor(max_workers=max(1, forks), thread_name_prefix="fleet")
    futures: dict[Future, Host] = {pool.submit(work, h, stop.is_set): h for h in hosts}
    pending = set(futures)
    try:
        while pending:
            # A timeout, so the main thread wakes up and Ctrl-C is delivered promptly.
            done, pending = wait(pending, timeout=0.2, return_when=FIRST_COMPLETED)
            for future in done:
                _collect(future, futures[future], results, progress)
    except KeyboardInterrupt:
        interrupted = True
        stop.set()
        if progress:
            progress.line("Interrupted: no new hosts start; running hosts finish their current "
                          "task and stop.")
        for future in pending:
            future.cancel()
        try:
            for future in pending:
                if not future.cancelled():
                    try:
                        while not future.done():  # a timeout, so a second Ctrl-C gets through
                            wait([future], timeout=0.2)
                        future.result()
                    except KeyboardInterrupt:
                        raise
                    except BaseException:
                        pass
                    _collect(future, futures[future], results, progress)
        except KeyboardInterrupt:
            _abandon([futures[f] for f in pending if not f.done() and not f.cancelled()], progress)
    finally:
        pool.shutdown(wait=not interrupted, cancel_futures=True)
    ordered = [results.get(h.name) or HostResult(h.name, INTERRUPTED, message="not started")
               for h in hosts]
    return ordered, interrupted


def _abandon(hosts: list[Host], progress: Progress | None) -> None:
    """The second Ctrl-C: say which hosts are left mid-task, and where, then exit now."""
    last = progress.last if progress else {}
    lines = ["Second Ctrl-C: exiting now; abandoned mid-task:"] + \
        [f"  {h.name}: after {last.get(h.name, 'no task finished yet')} (check it with fleet status)" for h in hosts]
    text = "\n".join(lines if hosts else ["Second Ctrl-C: exiting now."]) + "\n"
    (progress.out if progress else sys.stdout).write(text)
    for stream in (sys.stdout, sys.stderr, progress.out if progress else sys.stdout):
        try:
            stream.flush()
        except (OSError, ValueError):
            pass
    os._exit(EXIT_INTERRUPTED)  # worker threads blocked on a host must not keep the process


def _collect(future: Future, host: Host, results: dict[str, HostResult],
             progress: Progress | None) -> None:
    try:
        result = future.result()
    except Exception as exc:  # a bug in our own code: report it on the host, keep going
        result = HostResult(host.name, FAILED, message=f"{type(exc).__name__}: {exc}")
        result.counts[FAILED] += 1
    results[host.name] = result
    if progress:
        progress.host_done(result)


def exit_code(results: list[HostResult], interrupted: bool = False) -> int:
    if interrupted:
        return EXIT_INTERRUPTED
    code = EXIT_OK
    if any(r.status == FAILED for r in results):
        code |= EXIT_FAILED
    if any(r.status == UNREACHABLE for r in results):
        code |= EXIT_UNREACHABLE
    return code


def recap(results: list[HostResult], soul: bool = False) -> str:
    """The table after a run; `soul`: a SOUL column with the layered soul commit each host
    imported ("-" where it did not)."""
    header = ("HOST", "OK", "CHANGED", "FAILED", "UNREACHABLE", "SHA", *(("SOUL",) if soul else ()), "SECONDS")
    rows = [header]
    for r in results:
        rows.append((r.host, str(r.counts[OK]), str(r.counts[CHANGED]), str(r.counts[FAILED]),
                     "1" if r.status == UNREACHABLE else "0", (r.sha or "-")[:12],
                     *(((r.soul or "-")[:12],) if soul else ()), f"{r.seconds:.1f}"))
    widths = [max(len(row[i]) for row in rows) for i in range(len(header))]
    lines = []
    for row in rows:
        cells = [row[0].ljust(widths[0])] + [c.rjust(w) for c, w in zip(row[1:5], widths[1:5])] \
            + [c.ljust(w) for c, w in zip(row[5:-1], widths[5:-1])] + [row[-1].rjust(widths[-1])]
        lines.append("  ".join(cells).rstrip())
    problems = [f"  {r.host}: {r.status}: {r.message}" for r in results
                if r.status in (FAILED, UNREACHABLE, INTERRUPTED) and r.message]
    problems += [f"  {r.host}: problem: {p}" for r in results for p in r.problems]
    notes = [f"  {r.host}: {n}" for r in results for n in r.notes]
    return "\n".join(lines + (["", "Problems:", *problems] if problems else [])
                     + (["", "Notes:", *notes] if notes else []))
