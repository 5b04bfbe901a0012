"""Each host's memory, looked after from the operator: `fleet backup`, `fleet restore`, the
soul half of moving an agent (`fleet bootstrap NEW --memory-from OLD|BACKUP`), and a person's
look at what an agent remembers (`fleet memories HOST COMMAND …`: the runtime's own
`python -m soulgraph.memories` run on the host, on its agent's soul).

A backup is the runtime's own online backup (`python -m soulgraph.store backup`, which reads
the graph under the writers' lock while servers keep writing, and verifies what it wrote), made
on the host into a private temporary folder, then copied to the operator as

    DEST/<host>/<UTC time>/soul.json     (0600; folders 0700)
    DEST/<host>/<UTC time>/backup.json   (what the host reported: seq, counts, sha256, runtime)

and checked there: the copy's sha256 is the host's, and it loads on the operator with the
memory, link and hypothesis counts the host's `store check` gave. The host's temporary folder is
removed, and only the newest `keep` backups of each host are kept.

A restore sends a backup to the host (checked there by its sha256 first) and installs it with
the runtime's own `store restore --force`, which keeps the soul it replaces beside it first,
under one hold of the writers' lock; with `hermes` the gateway is then restarted through the
same `service` operation fleet-update uses.

Every remote call has a deadline; the file itself travels as base64 through a command with a
deadline too (SFTP reads have none).
"""

from __future__ import annotations

import base64
import hashlib
import json
import os
import re
import shlex
import shutil
import subprocess
import sys
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Callable

from fleet import hermes_names, host_lock
from fleet.connections import CommandTimeout, Connection, HostConnectionError
from fleet.deploy import UNREACHABLE, HostResult
from fleet.facts import expand_home, gather, sh_path
from fleet.inventory import Host
from fleet.operations import CHANGED, FAILED, OK, Context

SOUL_NAME, RECORD_NAME = "soul.json", "backup.json"
STAMP_FORMAT = "%Y%m%dT%H%M%SZ"
STAMP = re.compile(r"^\d{8}T\d{6}Z(-\d+)?$")  # a backup folder's name; nothing else is ever pruned
DEFAULT_KEEP = 7
BACKUP_SECONDS = 600  # the host's backup of a large soul, while writers hold the lock at times
TRANSFER_SECONDS = 600
SHORT_SECONDS = 60
CHECK_SECONDS = 600  # loading a copy on the operator
STALE_TMP_MINUTES = 60  # a host-side temporary folder older than this is a dropped run's, removed
MARK = "::soulfleet-backup::"
MEMORIES_SECONDS = 300  # one `soulgraph.memories` command on a host (a search of a large soul, a forget)



class BackupInputError(Exception):
    """Bad input for a backup or restore (a path that is not a backup, a missing runtime); the
    message names the problem. Nothing was changed."""


def default_dest() -> Path:
    """The operator's data folder: $XDG_DATA_HOME/soulfleet/backups, else ~/.local/share/..."""
    base = os.environ.get("XDG_DATA_HOME") or os.path.join(os.path.expanduser("~"), ".local", "share")
    return Path(base) / "soulfleet" / "backups"


# -- where things are on a host ----------------------------------------------------------------

@dataclass
class HostSoul:
    """A host's soul file and the Python of the release `current` points at (both absolute)."""

    facts: dict[str, Any]
    soul_file: str
    runtime_dir: str
    python: str | None  # None when no release is deployed
    sha: str | None
    names: hermes_names.HermesNames


def locate(conn: Connection, host: Host) -> HostSoul:
    """As fleet status finds them: the facts, the agent's Hermes home (its active profile's),
    the deployed release."""
    facts = gather(conn, host.vars)
    home = facts["home"]
    names = hermes_names.resolve(expand_home(str(host.vars["hermes_home"]), home), home,
                                 facts.get("active_profile"))
    runtime_dir = expand_home(str(host.vars["runtime_dir"]), home)
    sha = facts["deployed_sha"]
    python = f"{runtime_dir}/releases/{sha}/venv/bin/python" if sha else None
    return HostSoul(facts, f"{names.home.rstrip('/')}/{SOUL_NAME}", runtime_dir, python, sha, names)


def _store(where: HostSoul, *args: str) -> str:
    return f"{sh_path(where.python)} -m soulgraph.store {' '.join(sh_path(a) for a in args)}"


def memories_on_host(host: Host, args: list[str], *, timeout: float = MEMORIES_SECONDS):
    """Run `python -m soulgraph.memories COMMAND --soul-file <the agent's soul> ARGS` on the host,
    with the deployed release's Python; its Result (exit code, output). BackupInputError when no
    release is deployed there; the connection's errors (unreachable, a rejected key) and
    CommandTimeout pass to the caller."""
    with host.connection() as conn:
        where = locate(conn, host)
        if not where.python:
            raise BackupInputError(f"{host.name}: no runtime deployed under {where.runtime_dir} (run fleet-update first)")
        command, rest = args[0], args[1:]
        line = (f"{sh_path(where.python)} -m soulgraph.memories {shlex.quote(command)} --soul-file "
                f"{sh_path(where.soul_file)} {' '.join(shlex.quote(a) for a in rest)}")
        return conn.run(line, timeout=timeout)


# -- the memories web page of a host, through an SSH tunnel -------------------------------------

WEB_START_SECONDS = 60  # the host's server up: the soul loaded, its port bound, its URL printed
WEB_POLL_SECONDS = 10  # how often the operator's command looks whether the host's server still runs

# Run on the host with the release's Python: argv is the server's command line. Starts the
# server, and prints one line: SERVING {"pid", "url", "said"} once it prints its URL, or FAILED
# and why. Then the server runs until this one's stdin closes (the operator's command released
# it, ended or lost its connection: sshd closes it then) or it is signalled; the server is
# stopped with it, so it never outlives the operator's session.
WEB_WRAPPER = r"""
import json, os, signal, subprocess, sys, threading
child = subprocess.Popen(sys.argv[1:], stdin=subprocess.DEVNULL, stdout=subprocess.PIPE, stderr=subprocess.STDOUT)
def stop(*_):
    try:
        child.terminate()
        child.wait(10)
    except subprocess.TimeoutExpired:
        child.kill()
    os._exit(0)
for name in ("SIGTERM", "SIGHUP", "SIGINT"):
    signal.signal(getattr(signal, name), stop)
said, url = [], None
for raw in child.stdout:
    line = raw.decode("utf-8", "replace").strip()
    if line.startswith("http://"):
        url = line
        break
    if line:
        said.append(line)
if url is None:
    child.wait()
    print("FAILED " + (said[-1] if said else "the server exited %s before printing its URL" % child.returncode), flush=True)
    sys.exit(1)
print("SERVING " + json.dumps({"pid": os.getpid(), "url": url, "said": said}), flush=True)
threading.Thread(target=lambda: [None for _ in child.stdout], daemon=True).start()
def watch():
    sys.stdin.buffer.read()
    stop()
threading.Thread(target=watch, daemon=True).start()
child.wait()
os._exit(child.returncode)
"""


class WebFailed(Exception):
    """The host's memories page did not start, or stopped; the message says why."""


@dataclass
class WebSession:
    """A host's `soulgraph.memories serve`, held from the operator, and the local port that
    carries to it through the same SSH connection."""

    host: str
    url: str  # the operator's: http://127.0.0.1:<local port>/?token=<the host server's token>
    remote_url: str
    said: list[str]
    pid: int
    conn: Connection
    held: Any
    forward: Any

    def problem(self) -> str | None:
        """None while the host's server runs; else what ended it. The connection's errors
        (HostConnectionError) pass to the caller: the host is gone, and the server with it."""
        done = self.conn.run(f"kill -0 {self.pid}", timeout=SHORT_SECONDS)
        return None if done.ok else f"{self.host}: the memories server stopped"

    def close(self) -> None:
        """The local port closed, the host's server stopped (its stdin closed), the connection
        closed; safe to call twice."""
        self.forward.close()
        try:
            self.held.release()
        except HostConnectionError:
            pass
        self.conn.close()


def web_on_host(host: Host, *, allow_edits: bool = False, start_timeout: float = WEB_START_SECONDS) -> WebSession:
    """Start `python -m soulgraph.memories serve` on the host's own loopback, on its agent's soul,
    with the deployed release's Python; forward a local 127.0.0.1 port to it through the host's
    SSH connection (a direct-tcpip channel: nothing listens on the host beyond its loopback).
    BackupInputError when no release is deployed, WebFailed when the server does not start; the
    connection's errors pass to the caller."""
    conn = host.connection()
    forward = held = None
    try:
        where = locate(conn, host)
        if not where.python:
            raise BackupInputError(f"{host.name}: no runtime deployed under {where.runtime_dir} (run fleet-update first)")
        forward = conn.forward()
        server = [where.python, "-m", "soulgraph.memories", "serve", "--soul-file", where.soul_file,
                  "--port", "0", "--tunnel-port", str(forward.port)] + (["--allow-edits"] if allow_edits else [])
        line = (f"{sh_path(where.python)} -c {shlex.quote(WEB_WRAPPER)} "
                + " ".join(sh_path(a) for a in server))
        held = conn.hold(line, timeout=start_timeout)
        first = held.first_line
        if first.startswith("FAILED "):
            raise WebFailed(f"{host.name}: the memories server did not start: {first[7:]}")
        if not first.startswith("SERVING "):
            raise WebFailed(f"{host.name}: the memories server did not start within {start_timeout:g} s"
                            + (f": {first[:300]}" if first else ""))
        try:
            report = json.loads(first[8:])
            remote_url, pid = str(report["url"]), int(report["pid"])
            found = re.fullmatch(r"http://127\.0\.0\.1:(\d+)/\?token=([\w-]+)", remote_url)
            if not found:
                raise ValueError(remote_url)
        except (ValueError, KeyError, TypeError) as exc:
            raise WebFailed(f"{host.name}: the memories server's answer could not be read: {exc}") from None
        forward.remote_port = int(found.group(1))
        url = f"http://127.0.0.1:{forward.port}/?token={found.group(2)}"
        return WebSession(host.name, url, remote_url, list(report.get("said") or []), pid, conn, held, forward)
    except BaseException:
        if forward is not None:
            forward.close()
        if held is not None:
            try:
                held.release()
            except HostConnectionError:
                pass
        conn.close()
        raise


def _sha256_command(python: str, path: str) -> str:
    # The release's Python: sha256sum (Linux) and shasum (macOS) differ.
    script = "import hashlib,sys;print(hashlib.sha256(open(sys.argv[1],'rb').read()).hexdigest())"
    return f"{sh_path(python)} -S -c {shlex.quote(script)} {sh_path(path)}"


def _python_base64(python: str, way: str) -> str:
    """stdin to stdout through base64 (`encode` or `decode`), the same on Linux and macOS,
    whose base64(1) options differ."""
    script = f"import base64,sys;sys.stdout.buffer.write(base64.b64{way}(sys.stdin.buffer.read()))"
    return f"{sh_path(python)} -S -c {shlex.quote(script)}"


def _tail(text: str) -> str:
    lines = [line for line in text.strip().splitlines() if line.strip()]
    return lines[-1][:500] if lines else "no output"


# -- counts of a soul on the operator ----------------------------------------------------------

def soul_counts(path: Path) -> dict[str, Any]:
    """Load a soul file (a backup) here, as a server would, and count it; raises ValueError
    naming the problem when it does not load. The runtime's own `store check`, in a process of
    its own: the copies of many hosts are loaded at once, not one after another under one
    interpreter lock."""
    try:
        done = subprocess.run([sys.executable, "-m", "soulgraph.store", "check", str(path)], capture_output=True,
                              text=True, timeout=CHECK_SECONDS)
        report = json.loads(done.stdout)
    except subprocess.TimeoutExpired:
        raise ValueError(f"store check did not finish in {CHECK_SECONDS} s") from None
    except ValueError:
        raise ValueError(f"store check gave no report: {_tail(done.stderr or done.stdout)}") from None
    if not report.get("ok"):
        raise ValueError(str(report.get("problem") or "store check failed"))
    return {"seq": report["snapshot_seq"], "nodes": report["nodes"], "edges": report["edges"],
            "hypotheses": report["hypotheses"]}


def _sha256(data: bytes) -> str:
    return hashlib.sha256(data).hexdigest()


# -- the operator's backup folders ---------------------------------------------------------------

def host_folder(dest: Path, host: str) -> Path:
    return dest / host


def backups_of(dest: Path, host: str) -> list[Path]:
    """A host's backup folders, oldest first (their names are UTC times)."""
    folder = host_folder(dest, host)
    if not folder.is_dir():
        return []
    found = [p for p in folder.iterdir() if p.is_dir() and STAMP.match(p.name) and (p / SOUL_NAME).is_file()]
    return sorted(found, key=_stamp_key)


def _stamp_key(path: Path) -> tuple[str, int]:
    stamp, _, number = path.name.partition("-")
    return stamp, int(number or 1)


def _new_folder(dest: Path, host: str) -> Path:
    folder = host_folder(dest, host)
    _private_dirs(folder)
    stamp = time.strftime(STAMP_FORMAT, time.gmtime())
    number = 1
    while True:
        name = stamp if number == 1 else f"{stamp}-{number}"
        try:
            (folder / name).mkdir(mode=0o700)
            return folder / name
        except FileExistsError:
            number += 1


def _private_dirs(folder: Path) -> None:
    """The folder and its parents made 0700 (the ones we create; an existing parent is left as
    it is, but the host folders and the backups' own are always made private)."""
    folder.mkdir(mode=0o700, parents=True, exist_ok=True)
    os.chmod(folder, 0o700)


def _write_private(path: Path, data: bytes) -> None:
    tmp = path.with_name(f".{path.name}.tmp")
    fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
    os.fchmod(fd, 0o600)  # before the data: a file left from an older run may have another mode
    with os.fdopen(fd, "wb") as out:
        out.write(data)
        out.flush()
        os.fsync(out.fileno())
    os.replace(tmp, path)


def prune(dest: Path, host: str, keep: int, check: bool = False) -> list[Path]:
    """Remove all but the newest `keep` backups of a host; returns what was (or would be) removed."""
    found = backups_of(dest, host)
    old = found[:max(0, len(found) - keep)]
    if not check:
        for path in old:
            shutil.rmtree(path)
    return old


def resolve_backup(value: str, dest: Path, host: str | None) -> Path:
    """The backup file a --from/--memory-from value names: a soul file, a backup folder (its
    soul.json), a host's folder of backups (its newest), or `latest` (the newest of `host`
    under dest). Raises BackupInputError naming the problem."""
    if value == "latest":
        if not host:
            raise BackupInputError("'latest' needs a host")
        found = backups_of(dest, host)
        if not found:
            raise BackupInputError(f"no backup of {host} under {host_folder(dest, host)} (make one with: fleet backup {host})")
        return found[-1] / SOUL_NAME
    path = Path(value).expanduser()
    if path.is_file():
        return path.absolute()
    if path.is_dir():
        if (path / SOUL_NAME).is_file():
            return (path / SOUL_NAME).absolute()
        inside = sorted((p for p in path.iterdir() if p.is_dir() and STAMP.match(p.name)
                         and (p / SOUL_NAME).is_file()), key=_stamp_key)
        if inside:
            return (inside[-1] / SOUL_NAME).absolute()
        raise BackupInputError(f"{path} is a folder with no backup in it (no {SOUL_NAME}, no backup folders)")
    raise BackupInputError(f"{value}: no such backup (give a backup folder, its {SOUL_NAME}, or 'latest')")


def check_local_backup(path: Path) -> dict[str, Any]:
    """A backup on the operator, checked before it goes anywhere: it loads, and matches the
    sha256 its record names (when it has one). Returns its counts and sha256."""
    data = path.read_bytes()
    digest = _sha256(data)
    record_path = path.with_name(RECORD_NAME)
    if record_path.is_file():
        try:
            record = json.loads(record_path.read_text())
        except ValueError:
            record = {}
        if record.get("sha256") and record["sha256"] != digest:
            raise BackupInputError(f"{path} does not match its {RECORD_NAME} (sha256 {digest[:12]}, "
                               f"recorded {record['sha256'][:12]}): damaged; not used")
    try:
        counts = soul_counts(path)
    except ValueError as exc:
        raise BackupInputError(f"{path} is not a soul that loads: {exc}") from None
    return {**counts, "sha256": digest, "bytes": len(data), "data": data}


# -- one host's backup --------------------------------------------------------------------------

def backup_host(host: Host, *, dest: Path, keep: int, check: bool = False,
                on_line: Callable[[str], None] = lambda text: None,
                should_stop: Callable[[], bool] = lambda: False) -> HostResult:
    started = time.monotonic()
    result = HostResult(host.name, OK)
    conn = host.connection()
    remote_tmp = None
    try:
        where = locate(conn, host)
        result.sha = where.sha
        if not where.python:
            return _failed(result, f"no runtime deployed under {where.runtime_dir} (run fleet-update first)")
        if check:
            out = conn.run(_store(where, "check", where.soul_file), timeout=BACKUP_SECONDS)
            try:
                report = json.loads(out.stdout)
            except ValueError:
                return _failed(result, f"store check {where.soul_file}: {_tail(out.stderr or out.stdout)}")
            if not report.get("ok"):
                return _failed(result, f"{where.soul_file}: {report.get('problem')}")
            old = prune(dest, host.name, keep - 1, check=True)  # the one this run would add counts
            result.counts[CHANGED] += 1
            on_line(f"{host.name}: would back up {where.soul_file} ({report['nodes']} memories, "
                    f"{report['edges']} links) to {host_folder(dest, host.name)}/<UTC time>/{SOUL_NAME}"
                    + (f"; would remove {len(old)} older backup(s): {', '.join(p.name for p in old)}" if old else ""))
            result.status = CHANGED
            return result
        if should_stop():
            result.status, result.message = "interrupted", "stopped by Ctrl-C before it began"
            return result
        # A private folder of the host's own, beside the runtime (mktemp -d makes it 0700). One a
        # run left when its link dropped is removed by the next backup, once older than any run
        # can last (its deadlines add up to under STALE_TMP_MINUTES).
        tmp_root = f"{where.runtime_dir}/backup-tmp"
        made = conn.run(f"mkdir -p {sh_path(tmp_root)} && chmod 700 {sh_path(tmp_root)} && "
                        f"{{ find {sh_path(tmp_root)} -mindepth 1 -maxdepth 1 -name 'run.*' -mmin +{STALE_TMP_MINUTES} "
                        f"-exec rm -rf {{}} + 2>/dev/null || true; }} && "
                        f"mktemp -d {sh_path(tmp_root)}/run.XXXXXXXX", timeout=SHORT_SECONDS)
        if not made.ok:
            return _failed(result, f"cannot make a temporary folder in {tmp_root}: {_tail(made.stderr)}")
        remote_tmp = made.stdout.strip().splitlines()[-1]
        remote_file = f"{remote_tmp}/{SOUL_NAME}"
        taken = conn.run(f"{_store(where, 'backup', where.soul_file, remote_file)} && echo '{MARK}check' && "
                         f"{_store(where, 'check', remote_file)} && echo '{MARK}sha256' && "
                         f"{_sha256_command(where.python, remote_file)}", timeout=BACKUP_SECONDS)
        if not taken.ok:
            return _failed(result, f"store backup of {where.soul_file}: {_tail(taken.stderr or taken.stdout)}")
        made_report = json.loads(taken.stdout.partition(f"{MARK}check\n")[0])
        checked = json.loads(taken.stdout.partition(f"{MARK}check\n")[2].partition(f"{MARK}sha256\n")[0])
        host_sha256 = taken.stdout.partition(f"{MARK}sha256\n")[2].strip()
        result.counts[OK] += 1
        sent = conn.run(f"{_python_base64(where.python, 'encode')} < {sh_path(remote_file)}",
                        timeout=TRANSFER_SECONDS)
        if not sent.ok:
            return _failed(result, f"cannot read {remote_file}: {_tail(sent.stderr)}")
        data = base64.b64decode(sent.stdout)
        folder = _new_folder(dest, host.name)
        local = folder / SOUL_NAME
        try:
            _write_private(local, data)
            problem = _verify_copy(local, data, host_sha256, checked)
        except OSError as exc:
            problem = f"cannot be written ({exc.strerror or exc})"
        if problem:
            shutil.rmtree(folder, ignore_errors=True)
            return _failed(result, f"the copy of {where.soul_file} did not check: {problem}; removed")
        record = {"host": host.name, "soul_file": where.soul_file, "runtime": where.sha,
                  "taken_at": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()),
                  "seq": checked["snapshot_seq"], "nodes": checked["nodes"], "edges": checked["edges"],
                  "hypotheses": checked["hypotheses"], "bytes": len(data), "sha256": host_sha256,
                  "lock_seconds": made_report.get("lock_seconds")}
        _write_private(folder / RECORD_NAME, (json.dumps(record, indent=2) + "\n").encode())
        result.counts[CHANGED] += 1
        removed = prune(dest, host.name, keep)
        if removed:
            result.counts[CHANGED] += 1
        result.status = CHANGED
        result.facts = {"backup": str(local), **record}
        on_line(f"{host.name}: backed up {where.soul_file}: {record['nodes']} memories, {record['edges']} links, "
                f"seq {record['seq']}, {len(data)} bytes → {local} (checked)"
                + (f"; removed {len(removed)} older: {', '.join(p.name for p in removed)}" if removed else ""))
    except HostConnectionError as exc:
        result.status, result.message = UNREACHABLE, str(exc)
    except CommandTimeout as exc:
        _failed(result, str(exc))
    except (ValueError, KeyError) as exc:
        _failed(result, f"the host's answer could not be read: {exc}")
    finally:
        _remove_remote(conn, remote_tmp)
        conn.close()
        result.seconds = time.monotonic() - started
    return result


def _remove_remote(conn: Connection, folder: str | None) -> None:
    """A run's host-side temporary folder, removed; one left by a lost connection is private to
    the host's user, and the next backup removes it once it is old (STALE_TMP_MINUTES)."""
    if not folder:
        return
    try:
        conn.run(f"rm -rf {sh_path(folder)}", timeout=SHORT_SECONDS)
    except (HostConnectionError, CommandTimeout):
        pass


def _verify_copy(local: Path, data: bytes, host_sha256: str, checked: dict[str, Any]) -> str | None:
    if _sha256(local.read_bytes()) != host_sha256:
        return f"its sha256 is not the host's ({host_sha256[:12]})"
    try:
        counts = soul_counts(local)
    except ValueError as exc:
        return f"it does not load here: {exc}"
    for key, host_key in (("nodes", "nodes"), ("edges", "edges"), ("hypotheses", "hypotheses"), ("seq", "snapshot_seq")):
        if counts[key] != checked[host_key]:
            return f"it holds {counts[key]} {key} where the host's check counted {checked[host_key]}"
    return None


def _failed(result: HostResult, message: str) -> HostResult:
    result.status, result.message = FAILED, message
    result.counts[FAILED] += 1
    return result


# -- one host's restore ---------------------------------------------------------------------------

def restore_host(host: Host, backup: Path, *, check: bool = False, hermes: bool = False,
                 title: str = "restore", on_line: Callable[[str], None] = lambda text: None) -> HostResult:
    """Put the backup at `backup` (checked with check_local_backup) in place of the host's soul."""
    started = time.monotonic()
    result = HostResult(host.name, OK)
    local = check_local_backup(backup)
    conn = host.connection()
    lock = remote_tmp = None
    try:
        where = locate(conn, host)
        result.sha = where.sha
        if not where.python:
            return _failed(result, f"no runtime deployed under {where.runtime_dir} (run fleet-update first)")
        if check:
            result.status = CHANGED
            result.counts[CHANGED] += 1
            on_line(f"{host.name}: would restore {backup} ({local['nodes']} memories, {local['edges']} links) "
                    f"onto {where.soul_file}, keeping the soul there beside it first"
                    + ("; would restart the gateway" if hermes else ""))
            return result
        lock = host_lock.take(conn, expand_home(str(host.vars["python"]), where.facts["home"]), where.runtime_dir,
                              host_lock.owner_text(title, where.sha or ""))
        tmp_root = f"{where.runtime_dir}/restore-tmp"
        made = conn.run(f"mkdir -p {sh_path(tmp_root)} && chmod 700 {sh_path(tmp_root)} && "
                        f"mktemp -d {sh_path(tmp_root)}/run.XXXXXXXX", timeout=SHORT_SECONDS)
        if not made.ok:
            return _failed(result, f"cannot make a temporary folder in {tmp_root}: {_tail(made.stderr)}")
        remote_tmp = made.stdout.strip().splitlines()[-1]
        remote_file = f"{remote_tmp}/{SOUL_NAME}"
        encoded = base64.b64encode(local["data"])
        sent = conn.run(f"umask 077 && {_python_base64(where.python, 'decode')} > {sh_path(remote_file)}",
                        input=encoded, timeout=TRANSFER_SECONDS)
        digest = conn.run(_sha256_command(where.python, remote_file), timeout=SHORT_SECONDS)
        if not sent.ok or digest.stdout.strip() != local["sha256"]:
            return _failed(result, f"the backup did not arrive whole at {remote_file}: "
                                   f"{_tail(sent.stderr or digest.stderr or digest.stdout)}")
        done = conn.run(_store(where, "restore", remote_file, where.soul_file, "--force"), timeout=BACKUP_SECONDS)
        if not done.ok:
            return _failed(result, f"store restore onto {where.soul_file}: {_tail(done.stderr or done.stdout)}")
        report = json.loads(done.stdout)
        result.counts[CHANGED] += 1
        result.status = CHANGED
        kept = report.get("kept")
        result.facts = {"restore": report}
        on_line(f"{host.name}: restored {backup} onto {where.soul_file}: {report['nodes']} memories, seq {report['seq']}"
                + (f"; the soul it replaced ({kept['nodes']} memories) is kept at {kept['path']}" if kept
                   else "; there was no soul before"))
        if hermes:
            outcome = restart_gateway(conn, host, where)
            result.counts[outcome.status] += 1
            on_line(f"{host.name}: restart gateway: {outcome.status}"
                    + (f" — {outcome.message.splitlines()[0][:300]}" if outcome.message else ""))
            if outcome.failed:
                result.status, result.message = FAILED, f"restart gateway: {outcome.message}"
    except host_lock.HostLocked as exc:
        _failed(result, str(exc))
    except HostConnectionError as exc:
        result.status, result.message = UNREACHABLE, str(exc)
    except CommandTimeout as exc:
        _failed(result, str(exc))
    except (ValueError, KeyError) as exc:
        _failed(result, f"the host's answer could not be read: {exc}")
    finally:
        _remove_remote(conn, remote_tmp)
        if lock is not None:
            try:
                lock.release()
            except HostConnectionError:
                pass
        conn.close()
        result.seconds = time.monotonic() - started
    return result


def restart_gateway(conn: Connection, host: Host, where: HostSoul):
    """The gateway restarted as fleet-update's gateway role does (the `service` operation, with
    the inventory's own restart command and the record of the runtime it was restarted onto)."""
    from fleet.operations.service import service

    hvars = host.vars
    ctx = Context(conn, facts=where.facts, vars=dict(hvars))
    return service(ctx, unit=hvars.get("gateway_unit") or where.names.unit,
                   label=hvars.get("gateway_label") or where.names.label,
                   restart_command_override=hvars.get("gateway_restart_command") or None,
                   record=f"{where.runtime_dir}/gateway-runtime" if where.sha else None, runtime=where.sha)


