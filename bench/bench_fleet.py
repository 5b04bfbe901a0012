"""fleet-update against ansible-playbook: first deploy and no-change re-run on 5 and 20 lab hosts.

    .venv/bin/python bench/bench_fleet.py                 # sizes 5 and 20, both tools
    .venv/bin/python bench/bench_fleet.py --sizes 5 --tools ansible

For each size a real SSH lab comes up (tests/lab.py; root and sshd needed), every host gets a
Hermes home with a config.yaml owned by its user, and each tool in turn, on hosts reset to that
bare state, runs a first deploy of SHA and then the same command again (no change expected). Both
tools get a warm cache: Ansible's wheelhouse archive is built before timing, and fleet-update runs
once, untimed, on one host (which is then reset) so its build cache holds the wheel for SHA. Wall
times are of the whole command, as an operator waits for it. Logs go to --logs.

    .venv/bin/python bench/bench_fleet.py --backup 20 --memories 10000

times `fleet backup` instead: a lab of that many hosts gets the runtime (fleet-update) and a soul
of --memories memories each (one soul made here, copied to every host as its user's), then
`fleet backup --yes --forks N all` into a fresh folder runs --repeat times; each run is checked
(exit 0, one checked copy per host).
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import re
import subprocess
import sys
import tarfile
import tempfile
import time
from concurrent.futures import ThreadPoolExecutor
import statistics
from dataclasses import asdict, dataclass, field
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO))

from bench.ansible.inventory import write_ansible_inventory  # noqa: E402
from tests.host_layout import connect, make_hermes_home  # noqa: E402
from tests.lab import Lab  # noqa: E402

BIN = Path(sys.executable).parent
ANSIBLE_DIR = REPO / "bench" / "ansible"
CACHE = REPO / ".cache" / "bench"


@dataclass
class Timing:
    hosts: int
    tool: str
    run: str  # "first deploy" | "no-change re-run"
    seconds: float
    rc: int
    changed: int | None  # summed over hosts, from the tool's own recap
    log: str
    samples: list[float] = field(default_factory=list)  # every run; `seconds` is their median
    load: float = 0.0  # 1-minute load average when the run started (the cores are shared)


# -- preparing ----------------------------------------------------------------------------------

def resolve_sha(ref: str) -> str:
    return subprocess.run(["git", "-C", str(REPO), "rev-parse", "--verify", f"{ref}^{{commit}}"],
                          check=True, capture_output=True, text=True).stdout.strip()


def wheelhouse_archive(sha: str) -> Path:
    """A tar of the runtime wheel at `sha` plus its dependencies, for Ansible to unarchive."""
    archive = CACHE / f"wheelhouse-{sha}.tar"
    if archive.exists():
        return archive
    CACHE.mkdir(parents=True, exist_ok=True)
    with tempfile.TemporaryDirectory() as tmp:
        src, wheels = Path(tmp) / "src", Path(tmp) / "wheels"
        src.mkdir()
        # Only committed code, as fleet-update builds it.
        git = subprocess.Popen(["git", "-C", str(REPO), "archive", sha, "runtime"],
                               stdout=subprocess.PIPE)
        subprocess.run(["tar", "-x", "-C", str(src)], stdin=git.stdout, check=True)
        if git.wait() != 0:
            raise SystemExit(f"git archive {sha} failed")
        pip = subprocess.run([sys.executable, "-m", "pip", "wheel", "--quiet",
                              "--disable-pip-version-check", "--wheel-dir", str(wheels),
                              str(src / "runtime")], capture_output=True, text=True)
        if pip.returncode != 0:
            raise SystemExit(f"pip wheel failed:\n{pip.stderr[-3000:]}")
        partial = archive.with_suffix(".partial")
        with tarfile.open(partial, "w") as tar:
            for wheel in sorted(wheels.glob("*.whl")):
                tar.add(wheel, arcname=wheel.name)
        partial.rename(archive)
    return archive


def reset_host(lab_host) -> None:
    """Back to a host that has never been deployed to: only a Hermes home with its config."""
    with connect(lab_host) as conn:
        conn.run("rm -rf ~/.soulfleet ~/.hermes", check=True)
        make_hermes_home(conn, conn.run('printf "%s" "$HOME"', check=True).stdout + "/.hermes")


def reset_hosts(hosts) -> None:
    with ThreadPoolExecutor(8) as pool:
        list(pool.map(reset_host, hosts))


# -- running ------------------------------------------------------------------------------------

RUN_TIMEOUT = 1800  # seconds; a first 20-host deploy takes about 140 s, Ansible's about 170 s


def timed(argv: list[str], log: Path, env: dict | None = None) -> tuple[float, int, str]:
    started = time.perf_counter()
    try:
        proc = subprocess.run(argv, cwd=REPO, env={**os.environ, **(env or {})}, stdin=subprocess.DEVNULL,
                              capture_output=True, text=True, timeout=RUN_TIMEOUT)
    except subprocess.TimeoutExpired:
        raise SystemExit(f"{argv[0]} did not finish in {RUN_TIMEOUT} s: {' '.join(argv)}") from None
    seconds = time.perf_counter() - started
    log.write_text(f"$ {' '.join(argv)}\n# exit {proc.returncode} in {seconds:.2f} s\n"
                   f"{proc.stdout}\n--- stderr ---\n{proc.stderr}")
    return seconds, proc.returncode, proc.stdout


def ansible_changed(output: str) -> int | None:
    counts = re.findall(r"^\S+\s*:\s*ok=\d+\s+changed=(\d+)", output, re.M)
    return sum(map(int, counts)) if counts else None


def fleet_changed(output: str) -> int | None:
    """Sum of the CHANGED column of fleet-update's recap table."""
    lines = output.splitlines()
    for i, line in enumerate(lines):
        header = line.split()
        if header[:3] == ["HOST", "OK", "CHANGED"]:
            rows = [l.split() for l in lines[i + 1:] if l.strip()]
            rows = [r for r in rows if len(r) == len(header) and r[2].isdigit()]
            return sum(int(r[2]) for r in rows)
    return None


def first_and_reruns(tool: str, n: int, argv: list[str], env: dict | None, logs: Path,
                     changed_in, repeat: int) -> list[Timing]:
    """One first deploy, then `repeat` no-change re-runs reported by their median."""
    name = tool.split("-")[0]
    load = os.getloadavg()[0]
    log = logs / f"{name}-{n}-first.log"
    seconds, rc, stdout = timed(argv, log, env)
    first = Timing(n, tool, "first deploy", seconds, rc, changed_in(stdout), str(log), [seconds], load)
    reruns = []
    load = os.getloadavg()[0]
    for i in range(repeat):
        log = logs / f"{name}-{n}-rerun{i + 1}.log"
        seconds, rc, stdout = timed(argv, log, env)
        reruns.append((seconds, rc, changed_in(stdout), str(log)))
    samples = [r[0] for r in reruns]
    worst = max(reruns, key=lambda r: (r[1] != 0, r[2] or 0))  # report a bad re-run, if any
    again = Timing(n, tool, "no-change re-run", statistics.median(samples), worst[1], worst[2],
                   worst[3], samples, load)
    return [first, again]


def run_ansible(lab_dir: Path, inventory: Path, sha: str, archive: Path, forks: int, logs: Path,
                n: int, repeat: int) -> list[Timing]:
    ansible_inventory = write_ansible_inventory(inventory, lab_dir / "ansible-inventory.yml")
    argv = [str(BIN / "ansible-playbook"), "-i", str(ansible_inventory), "--forks", str(forks),
            str(ANSIBLE_DIR / "deploy.yml"), "-e", f"sha={sha}", "-e", f"wheelhouse_tar={archive}"]
    env = {"ANSIBLE_CONFIG": str(ANSIBLE_DIR / "ansible.cfg"), "LC_ALL": "C.UTF-8",
           "ANSIBLE_NOCOLOR": "1"}
    return first_and_reruns("ansible-playbook", n, argv, env, logs, ansible_changed, repeat)


def run_fleet(inventory: Path, sha: str, forks: int, logs: Path, n: int, repeat: int) -> list[Timing]:
    argv = [str(BIN / "fleet-update"), "--yes", "--forks", str(forks), "-i", str(inventory), "all", sha]
    return first_and_reruns("fleet-update", n, argv, None, logs, fleet_changed, repeat)


def warm_fleet_cache(lab: Lab, inventory: Path, sha: str, logs: Path) -> None:
    first = lab.hosts[0]
    timed([str(BIN / "fleet-update"), "--yes", "-i", str(inventory), first.name, sha],
          logs / "fleet-warm-up.log")
    reset_host(first)


def bench_size(n: int, tools: list[str], sha: str, archive: Path | None, forks: int,
               logs: Path, repeat: int) -> list[Timing]:
    timings: list[Timing] = []
    with Lab(n) as lab, tempfile.TemporaryDirectory(prefix="soulfleet-bench-") as tmp:
        lab_dir = Path(tmp)
        inventory = lab.write_inventory(lab_dir / "inventory.yml")
        print(f"lab of {n} hosts up in {lab.timings['up']:.1f} s", flush=True)
        if "fleet" in tools:
            warm_fleet_cache(lab, inventory, sha, logs)
        for tool in tools:
            reset_hosts(lab.hosts)
            if tool == "ansible":
                timings += run_ansible(lab_dir, inventory, sha, archive, forks, logs, n, repeat)
            else:
                timings += run_fleet(inventory, sha, forks, logs, n, repeat)
            for t in timings[-2:]:
                runs = " ".join(f"{x:.2f}" for x in t.samples)
                print(f"  {t.tool:16} {n:3} hosts  {t.run:17} {t.seconds:7.2f} s  rc={t.rc}  "
                      f"changed={t.changed}  runs: {runs}  load {t.load:.1f}", flush=True)
    return timings


def make_soul(path: Path, memories: int) -> None:
    """A soul of `memories` memories (tagged, some linked), written by the store itself."""
    from soulgraph.store.soulfile import SoulFile

    with SoulFile(path).change() as graph:
        previous = None
        for i in range(memories):
            node = graph.add(f"memory {i}: the deploy of release {i % 97} on host group {i % 13} went "
                             f"through after the wheelhouse check", [f"topic{i % 50}", "bench"],
                             parents=[previous.id] if previous is not None and i % 10 else [])
            previous = node


def give_soul(lab_host, soul: Path) -> None:
    import pwd
    import shutil

    target = lab_host.home / ".hermes" / "soul.json"
    for stale in target.parent.glob("soul.json*"):
        stale.unlink()
    shutil.copyfile(soul, target)
    owner = pwd.getpwnam(lab_host.user)
    os.chown(target, owner.pw_uid, owner.pw_gid)
    os.chmod(target, 0o600)


def bench_backup(n: int, memories: int, sha: str, forks: int, logs: Path, repeat: int) -> list[Timing]:
    timings: list[Timing] = []
    with Lab(n) as lab, tempfile.TemporaryDirectory(prefix="soulfleet-bench-backup-") as tmp:
        work = Path(tmp)
        inventory = lab.write_inventory(work / "inventory.yml")
        print(f"lab of {n} hosts up in {lab.timings['up']:.1f} s", flush=True)
        reset_hosts(lab.hosts)
        seconds, rc, out = timed([str(BIN / "fleet-update"), "--yes", "--forks", str(forks), "-i", str(inventory),
                                  "all", sha], logs / f"backup-{n}-deploy.log")
        if rc != 0:
            raise SystemExit(f"the deploy failed (exit {rc}): see {logs / f'backup-{n}-deploy.log'}")
        started = time.perf_counter()
        make_soul(work / "soul.json", memories)
        size = (work / "soul.json").stat().st_size
        print(f"  a soul of {memories} memories ({size / 1e6:.1f} MB) made in {time.perf_counter() - started:.1f} s",
              flush=True)
        with ThreadPoolExecutor(8) as pool:
            list(pool.map(lambda h: give_soul(h, work / "soul.json"), lab.hosts))
        samples, load = [], os.getloadavg()[0]
        for i in range(repeat):
            dest = work / f"backups-{i}"
            log = logs / f"backup-{n}-run{i + 1}.log"
            seconds, rc, out = timed([str(BIN / "fleet"), "backup", "--yes", "--forks", str(forks), "-i",
                                      str(inventory), "--dest", str(dest), "all"], log)
            copies = list(dest.glob("*/*/soul.json"))
            if rc != 0 or len(copies) != n or out.count(f": backed up ") != n:
                raise SystemExit(f"fleet backup run {i + 1} did not back up every host (exit {rc}): see {log}")
            samples.append(seconds)
            print(f"  fleet backup {n} hosts x {memories} memories: {seconds:.2f} s  rc={rc}  load {load:.1f}",
                  flush=True)
        timings.append(Timing(n, "fleet backup", f"{memories} memories ({size / 1e6:.1f} MB) each",
                              statistics.median(samples), 0, None, str(logs / f"backup-{n}-run1.log"), samples, load))
    return timings


# -- reporting ----------------------------------------------------------------------------------

def table(timings: list[Timing]) -> str:
    """Markdown: per size and run, both tools' seconds and Ansible's time over fleet-update's."""
    by = {(t.hosts, t.tool, t.run): t for t in timings}
    lines = ["| hosts | run | ansible-playbook | fleet-update | ratio (ansible / fleet) |",
             "|---:|---|---:|---:|---:|"]
    # No-change re-runs are the median of --repeat runs; first deploys are single runs.
    for n in sorted({t.hosts for t in timings}):
        for run in ("first deploy", "no-change re-run"):
            a, f = by.get((n, "ansible-playbook", run)), by.get((n, "fleet-update", run))
            cell = lambda t: "-" if t is None else \
                f"{t.seconds:.2f} s (changed={t.changed}{'' if t.rc == 0 else f', rc={t.rc}'})"
            ratio = f"{a.seconds / f.seconds:.1f}x" if a and f else "-"
            lines.append(f"| {n} | {run} | {cell(a)} | {cell(f)} | {ratio} |")
    return "\n".join(lines)


def machine_line(ansible: bool = True) -> str:
    cpus = os.cpu_count()
    model = ""
    try:
        model = next(l.split(":", 1)[1].strip() for l in open("/proc/cpuinfo") if l.startswith("model name"))
    except (OSError, StopIteration):
        pass
    line = f"{platform.platform()}, {cpus} CPUs ({model}), Python {platform.python_version()}"
    if not ansible:
        return line
    version = subprocess.run([str(BIN / "ansible-playbook"), "--version"], capture_output=True,
                             text=True).stdout.splitlines()[:1]
    return f"{line}, {version[0] if version else 'ansible-playbook missing'}"


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--sizes", default="5,20", help="lab sizes, comma separated (default 5,20)")
    parser.add_argument("--tools", default="ansible,fleet", help="ansible, fleet or both")
    parser.add_argument("--sha", default="HEAD", help="the commit to deploy (default HEAD)")
    parser.add_argument("--forks", type=int, default=20, help="hosts at once, for both tools")
    parser.add_argument("--repeat", type=int, default=3,
                        help="no-change re-runs per tool and size; their median is reported")
    parser.add_argument("--logs", type=Path, default=Path(tempfile.gettempdir()) / "soulfleet-bench-logs")
    parser.add_argument("--json", type=Path, help="also write the timings here")
    parser.add_argument("--backup", type=int, metavar="HOSTS", help="time `fleet backup` of this many hosts instead")
    parser.add_argument("--memories", type=int, default=10000, help="with --backup: memories in each host's soul")
    args = parser.parse_args(argv)
    tools = [t.strip() for t in args.tools.split(",") if t.strip()]
    sha = resolve_sha(args.sha)
    args.logs.mkdir(parents=True, exist_ok=True)
    if args.backup:
        timings = bench_backup(args.backup, args.memories, sha, args.forks, args.logs, args.repeat)
        print(f"\nmachine: {machine_line(ansible=False)}")
        for t in timings:
            print(f"| {t.hosts} | {t.run} | {t.seconds:.2f} s (runs: {' / '.join(f'{x:.2f}' for x in t.samples)}) |")
        if args.json:
            args.json.write_text(json.dumps({"sha": sha, "machine": machine_line(ansible=False),
                                             "timings": [asdict(t) for t in timings]}, indent=2))
        return 0
    archive = wheelhouse_archive(sha) if "ansible" in tools else None
    print(f"sha {sha}; logs in {args.logs}", flush=True)
    timings = []
    for n in [int(s) for s in args.sizes.split(",")]:
        timings += bench_size(n, tools, sha, archive, args.forks, args.logs, args.repeat)
    print()
    print(f"machine: {machine_line(ansible='ansible' in tools)}")
    print(table(timings))
    if args.json:
        args.json.write_text(json.dumps({"sha": sha, "machine": machine_line(ansible="ansible" in tools),
                                         "timings": [asdict(t) for t in timings]}, indent=2))
    return 0 if all(t.rc == 0 for t in timings) else 1


if __name__ == "__main__":
    sys.exit(main())
