"""A real SSH test lab on loopback: one sshd, one unix user and one home per "host".

No containers: each host is an OpenSSH server bound to its own 127.0.N.M:22 address with its own
host key and config, and its own unix user whose home plays the host's filesystem. The operator gets
one ed25519 client key authorised everywhere and a generated known_hosts file listing each host's
real key, so strict host-key checking can be exercised for real.

Needs root and /usr/sbin/sshd (``.ci/setup-system`` installs what is needed).

Labs are numbered in slots so that several test sessions on one machine (other worktrees, a
benchmark) never fight over users or addresses: slot 0 is users ``sflab01``.. on ``127.0.0.11``..,
slot 1 ``sflaba01``.. on ``127.0.1.11``.., and so on. A slot is held through an exclusive lock on a
file, which the kernel releases when the holder dies; whoever takes a slot first removes whatever a
killed run left in it (sshd processes, users, homes).

    with Lab(5) as lab:
        for host in lab.hosts:
            print(host.name, host.address, host.user, lab.key, lab.known_hosts)
"""

from __future__ import annotations

import argparse
import fcntl
import json
import os
import pwd
import re
import shlex
import shutil
import signal
import socket
import subprocess
import sys
import time
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from pathlib import Path
from typing import Iterable, Mapping

import yaml

SSHD = "/usr/sbin/sshd"
DEFAULT_ROOT = Path(os.environ.get("SOULFLEET_LAB_ROOT", "/tmp/soulfleet-lab"))
MAX_SLOTS = 8
FIRST_HOST_OCTET = 11  # host i (1-based) listens on 127.0.<slot>.<10 + i>
LOGIN_PATH = "/usr/local/bin:/usr/bin:/bin"


def unavailable_reason(sshd: str = SSHD) -> str | None:
    """Why the lab cannot run on this machine, or None when it can."""
    if os.geteuid() != 0:
        return "the SSH lab needs root (it creates unix users and runs sshd); run .ci/setup-system as root"
    if not os.access(sshd, os.X_OK):
        return f"{sshd} is missing: install openssh-server (.ci/setup-system)"
    for tool in ("useradd", "userdel", "ssh-keygen"):
        if shutil.which(tool) is None:
            return f"{tool} is missing: run .ci/setup-system"
    return None


def user_prefix(slot: int) -> str:
    # Slot 0 keeps the short, readable names; other slots get a letter so no prefix is a prefix
    # of another slot's user names plus digits.
    return "sflab" if slot == 0 else "sflab" + "abcdefghij"[slot - 1]


@dataclass
class FakeCommand:
    """A stand-in for a command on one lab host: prints `stdout`/`stderr`, exits with `rc`.

    `by_args` maps the space-joined arguments to a different stdout (e.g. {"-s": "Darwin"} for
    `uname -s`). For anything cleverer, pass a bash script body instead of a FakeCommand.
    """

    stdout: str = ""
    stderr: str = ""
    rc: int = 0
    by_args: Mapping[str, str] = field(default_factory=dict)

    def script_body(self) -> str:
        lines = ['case "$*" in']
        for args, out in self.by_args.items():
            lines.append(f"  {shlex.quote(args)}) printf %s {shlex.quote(out)} ;;")
        lines.append(f"  *) printf %s {shlex.quote(self.stdout)} ;;")
        lines.append("esac")
        if self.stderr:
            lines.append(f"printf %s {shlex.quote(self.stderr)} >&2")
        lines.append(f"exit {int(self.rc)}")
        return "\n".join(lines) + "\n"


@dataclass
class LabHost:
    """One lab host. `key` and `known_hosts` are the operator's files for reaching it."""

    name: str
    address: str
    port: int
    user: str
    home: Path
    key: Path
    known_hosts: Path
    state_dir: Path  # root-owned: sshd_config, host key, pid file, log, fake commands

    @property
    def sshd_config(self) -> Path:
        return self.state_dir / "sshd_config"

    @property
    def host_key(self) -> Path:
        return self.state_dir / "ssh_host_ed25519_key"

    @property
    def pid_file(self) -> Path:
        return self.state_dir / "sshd.pid"

    @property
    def log_file(self) -> Path:
        return self.state_dir / "sshd.log"

    @property
    def fake_bin(self) -> Path:
        return self.state_dir / "fake-bin"

    @property
    def fake_calls_file(self) -> Path:
        return self.state_dir / "fake-calls.jsonl"

    @property
    def known_hosts_name(self) -> str:
        """How known_hosts names this host (OpenSSH only brackets non-default ports)."""
        return self.address if self.port == 22 else f"[{self.address}]:{self.port}"

    def public_host_key(self) -> str:
        """`<type> <base64>` of the host's real key."""
        kind, blob = Path(f"{self.host_key}.pub").read_text().split()[:2]
        return f"{kind} {blob}"


def inventory_data(
    hosts: Iterable[LabHost],
    groups: Mapping[str, Iterable[str]] | None = None,
    host_vars: Mapping[str, Mapping[str, object]] | None = None,
    common_vars: Mapping[str, object] | None = None,
) -> dict:
    """An Ansible-shaped inventory for lab hosts: all.children.<group>.hosts.<name>.{address,...}.

    Every host is in `workers` unless `groups` says otherwise. Kept deliberately small so it can
    follow the fleet's inventory format as that evolves.
    """
    hosts = list(hosts)
    groups = dict(groups) if groups is not None else {"workers": [h.name for h in hosts]}
    by_name = {h.name: h for h in hosts}
    extra = host_vars or {}
    children: dict = {}
    for group, names in groups.items():
        members = {}
        for name in names:
            h = by_name[name]
            entry = {"address": h.address, "port": h.port, "user": h.user, "key": str(h.key)}
            entry.update(extra.get(name, {}))
            members[name] = entry
        children[group] = {"hosts": members}
    everything: dict = {"children": children}
    if hosts or common_vars:
        everything["vars"] = {"known_hosts": str(hosts[0].known_hosts)} if hosts else {}
        everything["vars"].update(common_vars or {})
    return {"all": everything}


class LabError(RuntimeError):
    pass


class Lab:
    """N real SSH hosts on loopback. Use as a context manager; `down()` is idempotent."""

    def __init__(self, n: int = 5, *, slot: int | None = None, root: Path | str | None = None,
                 sshd: str = SSHD, lock_timeout: float = 600.0):
        if not 1 <= n <= 254 - FIRST_HOST_OCTET:
            raise ValueError(f"a lab has 1..{254 - FIRST_HOST_OCTET} hosts, not {n}")
        self.n = n
        self.root = Path(root) if root is not None else DEFAULT_ROOT
        self.sshd = sshd
        self.requested_slot = slot
        self.lock_timeout = lock_timeout
        self.slot: int | None = None
        self.hosts: list[LabHost] = []
        self.timings: dict[str, float] = {}
        self._lock_fd: int | None = None
        self._sshd: dict[str, subprocess.Popen] = {}
        self._stopped: set[str] = set()
        self._frozen: dict[str, list[int]] = {}
        self._faked: set[str] = set()
        self._impostors: dict[str, str] = {}  # name -> key that tamper_known_hosts wrote

    # -- paths -------------------------------------------------------------------------------

    @property
    def dir(self) -> Path:
        return self.root / f"slot{self.slot}"

    @property
    def key(self) -> Path:
        """The operator's private key (ed25519), authorised on every host."""
        return self.dir / "operator" / "id_ed25519"

    @property
    def known_hosts(self) -> Path:
        return self.dir / "operator" / "known_hosts"

    # -- lifecycle ---------------------------------------------------------------------------

    def __enter__(self) -> "Lab":
        self.up()
        return self

    def __exit__(self, *exc) -> None:
        self.down()

    def up(self) -> "Lab":
        reason = unavailable_reason(self.sshd)
        if reason:
            raise LabError(reason)
        started = time.monotonic()
        self._take_slot()
        try:
            clean_slot(self.root, self.slot)
            self.timings["clean"] = time.monotonic() - started
            self._build()
        except BaseException:
            self.down()
            raise
        self.timings["up"] = time.monotonic() - started
        return self

    def down(self) -> None:
        """Stop every sshd, remove users and homes, release the slot."""
        if self.slot is None:
            return
        # Signal every sshd first, then wait: stopping them one by one adds up on 20 hosts.
        for proc in self._sshd.values():
            if proc.poll() is None:
                proc.terminate()
        for proc in self._sshd.values():
            try:
                proc.wait(timeout=5)
            except subprocess.TimeoutExpired:
                proc.kill()
                proc.wait()
        self._sshd.clear()
        clean_slot(self.root, self.slot)
        self.hosts = []
        if self._lock_fd is not None:
            os.close(self._lock_fd)
            self._lock_fd = None
        self.slot = None

    def _take_slot(self) -> None:
        self.root.mkdir(mode=0o755, parents=True, exist_ok=True)
        os.chmod(self.root, 0o755)
        slots = [self.requested_slot] if self.requested_slot is not None else range(MAX_SLOTS)
        deadline = time.monotonic() + self.lock_timeout
        while True:
            for slot in slots:
                fd = os.open(self.root / f"slot{slot}.lock", os.O_RDWR | os.O_CREAT, 0o644)
                try:
                    fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
                except BlockingIOError:
                    os.close(fd)
                    continue
                self.slot, self._lock_fd = slot, fd
                return
            if time.monotonic() > deadline:
                raise LabError(f"no free lab slot in {self.root} after {self.lock_timeout:.0f} s")
            time.sleep(0.2)

    def _build(self) -> None:
        t0 = time.monotonic()
        operator = self.dir / "operator"
        (self.dir / "homes").mkdir(mode=0o755, parents=True)
        (self.dir / "hosts").mkdir(mode=0o755)
        operator.mkdir(mode=0o700)
        os.chmod(self.dir, 0o755)
        os.chmod(self.dir / "homes", 0o755)
        prefix = user_prefix(self.slot)
        for i in range(1, self.n + 1):
            name = f"{prefix}{i:02d}"
            self.hosts.append(LabHost(
                name=name, address=f"127.0.{self.slot}.{FIRST_HOST_OCTET - 1 + i}", port=22,
                user=name, home=self.dir / "homes" / name, key=self.key,
                known_hosts=self.known_hosts, state_dir=self.dir / "hosts" / name))
            self.hosts[-1].state_dir.mkdir(mode=0o755)

        # Key generation is the slow part: run every ssh-keygen at once.
        with ThreadPoolExecutor(max_workers=16) as pool:
            jobs = [pool.submit(_keygen, self.key, "soulfleet-lab-operator")]
            jobs += [pool.submit(_keygen, h.host_key, h.name) for h in self.hosts]
            for job in jobs:
                job.result()
        self.timings["keygen"] = time.monotonic() - t0

        # useradd takes a lock on /etc/passwd, so users are made one after another.
        t1 = time.monotonic()
        operator_pub = Path(f"{self.key}.pub").read_text()
        for h in self.hosts:
            _create_user(h, operator_pub)
        self.timings["users"] = time.monotonic() - t1

        t2 = time.monotonic()
        self.write_known_hosts()
        Path("/run/sshd").mkdir(mode=0o755, exist_ok=True)  # sshd's privilege-separation dir
        for h in self.hosts:
            _write_sshd_config(h)
            self._spawn_sshd(h)
        for h in self.hosts:
            self._wait_listening(h)
        self.timings["sshd"] = time.monotonic() - t2

    # -- sshd processes ----------------------------------------------------------------------

    def _spawn_sshd(self, h: LabHost) -> None:
        h.pid_file.unlink(missing_ok=True)
        # -D keeps sshd in the foreground so we own the process; -E gives it an absolute log.
        self._sshd[h.name] = subprocess.Popen(
            [self.sshd, "-D", "-f", str(h.sshd_config), "-E", str(h.log_file)],
            stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
            start_new_session=True)

    def _wait_listening(self, h: LabHost, timeout: float = 10.0) -> None:
        deadline = time.monotonic() + timeout
        proc = self._sshd[h.name]
        while time.monotonic() < deadline:
            if proc.poll() is not None:
                raise LabError(f"sshd for {h.name} exited with {proc.returncode}:\n{_tail(h.log_file)}")
            try:
                with socket.create_connection((h.address, h.port), timeout=0.5):
                    return
            except OSError:
                time.sleep(0.01)
        raise LabError(f"sshd for {h.name} did not listen on {h.address}:{h.port}:\n{_tail(h.log_file)}")

    # -- lookups -----------------------------------------------------------------------------

    def host(self, which: LabHost | str | int) -> LabHost:
        """A host by LabHost, name, or 0-based index."""
        if isinstance(which, LabHost):
            return which
        if isinstance(which, int):
            return self.hosts[which]
        for h in self.hosts:
            if h.name == which:
                return h
        raise KeyError(which)

    def __iter__(self):
        return iter(self.hosts)

    def __len__(self) -> int:
        return len(self.hosts)

    # -- known_hosts and inventory -----------------------------------------------------------

    def write_known_hosts(self, path: Path | None = None,
                          replace: Mapping[str, str] | None = None) -> Path:
        """Write a known_hosts listing every host's real key (`replace`: name -> other key)."""
        path = path or self.known_hosts
        replace = replace or {}
        lines = [f"{h.known_hosts_name} {replace.get(h.name) or h.public_host_key()}\n"
                 for h in self.hosts]
        _write_atomic(path, "".join(lines), 0o644)
        return path

    def write_inventory(self, path: Path | str, groups: Mapping[str, Iterable[str]] | None = None,
                        host_vars: Mapping[str, Mapping[str, object]] | None = None,
                        common_vars: Mapping[str, object] | None = None) -> Path:
        path = Path(path)
        data = inventory_data(self.hosts, groups, host_vars, common_vars)
        path.write_text(yaml.safe_dump(data, sort_keys=False))
        return path

    # -- fault injection ---------------------------------------------------------------------

    def stop(self, which) -> LabHost:
        """Make a host unreachable: its sshd and every process of its user are killed."""
        h = self.host(which)
        proc = self._sshd.pop(h.name, None)
        if proc is not None:
            _terminate(proc.pid)
            proc.wait()
        _kill_user_processes(h.user)
        self._stopped.add(h.name)
        return h

    def start(self, which) -> LabHost:
        """Bring a stopped host back."""
        h = self.host(which)
        if h.name in self._sshd and self._sshd[h.name].poll() is None:
            return h
        self._spawn_sshd(h)
        self._wait_listening(h)
        self._stopped.discard(h.name)
        return h

    def freeze(self, which) -> LabHost:
        """The host stops answering without closing anything, as when its link goes down: its
        sshd, every session under it and every process of its user get SIGSTOP. The kernel
        still holds the TCP connections open; nothing answers on them. `thaw` (or `heal`)
        undoes it."""
        h = self.host(which)
        proc = self._sshd.get(h.name)
        pids = _descendants(proc.pid) if proc is not None else []
        pids += [pid for pid in _pids_of_uid(pwd.getpwnam(h.user).pw_uid) if pid not in pids]
        for pid in pids:
            try:
                os.kill(pid, signal.SIGSTOP)
            except ProcessLookupError:
                pass
        self._frozen[h.name] = pids
        return h

    def thaw(self, which) -> LabHost:
        h = self.host(which)
        for pid in self._frozen.pop(h.name, []):
            try:
                os.kill(pid, signal.SIGCONT)
            except ProcessLookupError:
                pass
        return h

    def tamper_known_hosts(self, which) -> str:
        """Replace the host's key in known_hosts with another valid key; returns that key."""
        h = self.host(which)
        impostor = h.state_dir / "impostor_key"
        if not impostor.exists():
            _keygen(impostor, f"impostor-{h.name}")
        kind, blob = Path(f"{impostor}.pub").read_text().split()[:2]
        self._impostors[h.name] = f"{kind} {blob}"
        self.write_known_hosts(replace=self._impostors)
        return self._impostors[h.name]

    def fake_commands(self, which, commands: Mapping[str, str | FakeCommand]) -> Path:
        """Put stand-in commands first on the host's PATH for SSH sessions.

        Each value is a FakeCommand or a bash script body. Every call is recorded (argv as JSON,
        one line per call) before the stand-in runs; read them with `fake_calls(host)`.
        """
        h = self.host(which)
        h.fake_bin.mkdir(mode=0o755, exist_ok=True)
        owner = pwd.getpwnam(h.user)
        if not h.fake_calls_file.exists():
            h.fake_calls_file.touch(mode=0o644)
            os.chown(h.fake_calls_file, owner.pw_uid, owner.pw_gid)
        record = ("/usr/bin/python3 -c 'import json, os, sys; "
                  "print(json.dumps({\"argv\": sys.argv[1:], \"cwd\": os.getcwd()}))' "
                  f'"$(basename "$0")" "$@" >> {shlex.quote(str(h.fake_calls_file))}\n')
        for name, spec in commands.items():
            body = spec.script_body() if isinstance(spec, FakeCommand) else spec
            script = h.fake_bin / name
            script.write_text("#!/bin/bash\n" + record + body)
            script.chmod(0o755)
        # sshd reads ~/.ssh/environment because the lab's config permits PATH from it.
        env_file = h.home / ".ssh" / "environment"
        env_file.write_text(f"PATH={h.fake_bin}:{LOGIN_PATH}\n")
        os.chown(env_file, owner.pw_uid, owner.pw_gid)
        env_file.chmod(0o600)
        self._faked.add(h.name)
        return h.fake_bin

    def fake_calls(self, which) -> list[list[str]]:
        """argv of every recorded stand-in call on the host, oldest first."""
        h = self.host(which)
        if not h.fake_calls_file.exists():
            return []
        return [json.loads(line)["argv"] for line in h.fake_calls_file.read_text().splitlines()
                if line.strip()]

    def remove_fakes(self, which) -> None:
        h = self.host(which)
        (h.home / ".ssh" / "environment").unlink(missing_ok=True)
        shutil.rmtree(h.fake_bin, ignore_errors=True)
        h.fake_calls_file.unlink(missing_ok=True)
        self._faked.discard(h.name)

    def heal(self) -> None:
        """Undo every fault: restart stopped hosts, restore known_hosts, remove stand-ins.

        Cheap when nothing is broken, so a shared lab can be healed after every test.
        """
        for name in list(self._frozen):
            self.thaw(name)
        for name in list(self._stopped):
            self.start(name)
        for name, proc in list(self._sshd.items()):
            if proc.poll() is not None:  # died on its own or killed from outside
                self.start(name)
        if self._impostors:
            self._impostors.clear()
            self.write_known_hosts()
        for name in list(self._faked):
            self.remove_fakes(name)


# -- cleaning a slot -----------------------------------------------------------------------------

def clean_slot(root: Path, slot: int) -> None:
    """Remove everything a lab in this slot may have left: sshds, user processes, users, files.

    Only call while holding the slot's lock. Processes are found by id: sshds whose command line
    names this slot's directory, and processes owned by this slot's lab users.
    """
    slot_dir = root / f"slot{slot}"
    marker = str(slot_dir) + "/"
    for pid in _pids_with_cmdline(marker):
        if _exe(pid).endswith("sshd"):
            _terminate(pid)
    pattern = re.compile(rf"^{re.escape(user_prefix(slot))}\d+$")
    for entry in pwd.getpwall():
        if pattern.match(entry.pw_name):
            _kill_user_processes(entry.pw_name)
            subprocess.run(["userdel", entry.pw_name], check=False,
                           stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
            if _user_exists(entry.pw_name):
                # A process outlived the kill (e.g. a session just forking): try once more.
                _kill_user_processes(entry.pw_name)
                subprocess.run(["userdel", "-f", entry.pw_name], check=True,
                               stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    shutil.rmtree(slot_dir, ignore_errors=True)


def _user_exists(name: str) -> bool:
    try:
        pwd.getpwnam(name)
        return True
    except KeyError:
        return False


def _proc_pids() -> list[int]:
    return [int(p) for p in os.listdir("/proc") if p.isdigit()]


def _pids_with_cmdline(fragment: str) -> list[int]:
    me = os.getpid()
    found = []
    for pid in _proc_pids():
        try:
            cmdline = Path(f"/proc/{pid}/cmdline").read_bytes().replace(b"\0", b" ").decode(
                errors="replace")
        except OSError:
            continue
        if pid != me and fragment in cmdline:
            found.append(pid)
    return found


def _exe(pid: int) -> str:
    try:
        return os.readlink(f"/proc/{pid}/exe")
    except OSError:
        return ""


def _descendants(pid: int) -> list[int]:
    """`pid` and every process below it."""
    children: dict[int, list[int]] = {}
    for other in _proc_pids():
        try:
            ppid = int(Path(f"/proc/{other}/stat").read_text().rsplit(")", 1)[1].split()[1])
        except (OSError, ValueError, IndexError):
            continue
        children.setdefault(ppid, []).append(other)
    found, todo = [], [pid]
    while todo:
        current = todo.pop()
        found.append(current)
        todo += children.get(current, [])
    return found


def _pids_of_uid(uid: int) -> list[int]:
    found = []
    for pid in _proc_pids():
        try:
            if os.stat(f"/proc/{pid}").st_uid == uid:
                found.append(pid)
        except OSError:
            continue
    return found


def _kill_user_processes(user: str) -> None:
    try:
        uid = pwd.getpwnam(user).pw_uid
    except KeyError:
        return
    if uid == 0:
        raise LabError(f"refusing to kill processes of {user}: uid 0")
    for _ in range(5):
        pids = _pids_of_uid(uid)
        if not pids:
            return
        for pid in pids:
            try:
                os.kill(pid, signal.SIGKILL)
            except ProcessLookupError:
                pass
        time.sleep(0.05)


def _terminate(pid: int, grace: float = 2.0) -> None:
    """SIGTERM, then SIGKILL if the process is still there after `grace` seconds."""
    try:
        os.kill(pid, signal.SIGTERM)
    except ProcessLookupError:
        return
    deadline = time.monotonic() + grace
    while time.monotonic() < deadline:
        try:
            # Reap it if it is our child; otherwise just see whether it is gone.
            if os.waitpid(pid, os.WNOHANG)[0] == pid:
                return
        except ChildProcessError:
            pass
        if not Path(f"/proc/{pid}").exists() or _is_zombie(pid):
            return
        time.sleep(0.01)
    try:
        os.kill(pid, signal.SIGKILL)
    except ProcessLookupError:
        pass


def _is_zombie(pid: int) -> bool:
    try:
        return Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0] == "Z"
    except (OSError, IndexError):
        return True


# -- building blocks ------------------------------------------------------------------------------

def _keygen(path: Path, comment: str) -> None:
    subprocess.run(["ssh-keygen", "-q", "-t", "ed25519", "-N", "", "-C", comment, "-f", str(path)],
                   check=True, stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL)


def _create_user(h: LabHost, authorized_key: str) -> None:
    # Password '*' rather than useradd's locked '!': with UsePAM no, sshd refuses key logins
    # to accounts whose password is locked.
    subprocess.run(["useradd", "--no-user-group", "--gid", "nogroup", "--home-dir", str(h.home),
                    "--create-home", "--shell", "/bin/bash", "--password", "*",
                    "--comment", "soulfleet lab host", h.user],
                   check=True, stdout=subprocess.DEVNULL)
    owner = pwd.getpwnam(h.user)
    # StrictModes: the home and ~/.ssh must not be group- or world-writable.
    os.chmod(h.home, 0o755)
    ssh_dir = h.home / ".ssh"
    ssh_dir.mkdir(mode=0o700)
    authorized = ssh_dir / "authorized_keys"
    authorized.write_text(authorized_key)
    authorized.chmod(0o600)
    for path in (ssh_dir, authorized):
        os.chown(path, owner.pw_uid, owner.pw_gid)


def _write_sshd_config(h: LabHost) -> None:
    h.sshd_config.write_text(f"""\
# soulfleet lab host {h.name}
ListenAddress {h.address}:{h.port}
HostKey {h.host_key}
PidFile {h.pid_file}
AllowUsers {h.user}
UsePAM no
PermitRootLogin no
PubkeyAuthentication yes
AuthorizedKeysFile .ssh/authorized_keys
PasswordAuthentication no
KbdInteractiveAuthentication no
StrictModes yes
# The default 10:30:100 drops connections when a whole fleet run connects at once.
MaxStartups 100:30:200
MaxSessions 100
# Lets a host's ~/.ssh/environment put stand-in commands (fake uname, launchctl) first on PATH.
PermitUserEnvironment PATH
UseDNS no
PrintMotd no
X11Forwarding no
AcceptEnv LANG LC_*
Subsystem sftp internal-sftp
LogLevel VERBOSE
""")


def _write_atomic(path: Path, text: str, mode: int) -> None:
    tmp = path.with_name(f".{path.name}.tmp{os.getpid()}")
    tmp.write_text(text)
    tmp.chmod(mode)
    os.replace(tmp, path)


def _tail(path: Path, lines: int = 20) -> str:
    try:
        return "\n".join(path.read_text(errors="replace").splitlines()[-lines:])
    except OSError:
        return "(no log)"


# -- command line: bring a lab up by hand (benchmarks, debugging) ---------------------------------

def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m tests.lab", description=__doc__.split("\n")[0])
    sub = parser.add_subparsers(dest="action", required=True)
    up = sub.add_parser("up", help="bring a lab up and keep it until Ctrl-C")
    up.add_argument("n", type=int, nargs="?", default=5)
    up.add_argument("--slot", type=int)
    up.add_argument("--inventory", type=Path, help="also write an inventory here")
    clean = sub.add_parser("clean", help="remove leftovers of a killed lab in a slot")
    clean.add_argument("--slot", type=int, default=0)
    args = parser.parse_args(argv)

    if args.action == "clean":
        lab = Lab(1, slot=args.slot, lock_timeout=0)
        lab._take_slot()
        clean_slot(lab.root, args.slot)
        return 0

    # Tear down on SIGTERM too, not only Ctrl-C.
    signal.signal(signal.SIGTERM, lambda *_: sys.exit(0))
    with Lab(args.n, slot=args.slot) as lab:
        if args.inventory:
            lab.write_inventory(args.inventory)
        print(json.dumps({
            "slot": lab.slot, "key": str(lab.key), "known_hosts": str(lab.known_hosts),
            "inventory": str(args.inventory) if args.inventory else None,
            "hosts": [{"name": h.name, "address": h.address, "user": h.user} for h in lab.hosts],
            "timings": {k: round(v, 3) for k, v in lab.timings.items()},
        }, indent=2), flush=True)
        try:
            signal.pause()
        except KeyboardInterrupt:
            pass
    return 0


if __name__ == "__main__":
    sys.exit(main())
