"""Is fleet-update's no-change re-run slower than it was? Two commits side by side, interleaved.

    .venv/bin/python bench/bench_fleet_ab.py --base b78fb70            # against HEAD, 20 hosts
    .venv/bin/python bench/bench_fleet_ab.py --base b78fb70 --sha HEAD --hosts 20 --repeat 5

Figures taken on different days (or while other work shares the cores) move by ±30 %, more than
most regressions. So both commits run in one invocation under the same load: two labs of the same
size come up (tests/lab.py slots), each is deployed by its own commit's fleet-update (untimed, as
is that commit's build), then the no-change re-runs alternate between them, BASE, SHA, BASE, SHA…
The base commit runs from a git worktree (its own fleet and runtime on PYTHONPATH).
"""

from __future__ import annotations

import argparse
import os
import statistics
import subprocess
import sys
import tempfile
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO))

from bench.bench_fleet import BIN, fleet_changed, machine_line, reset_hosts, resolve_sha, timed  # noqa: E402
from tests.lab import Lab  # noqa: E402


def update_command(checkout: Path | None, inventory: Path, sha: str, forks: int) -> tuple[list[str], dict]:
    """fleet-update of this repository (checkout None) or of a worktree at another commit."""
    args = ["--yes", "--forks", str(forks), "-i", str(inventory), "all", sha]
    if checkout is None:
        return [str(BIN / "fleet-update"), *args], {}
    code = "import sys; from fleet.cli import fleet_update; sys.argv[0] = 'fleet-update'; fleet_update()"
    # -P: the cwd (this repository) is not put first on the path; the worktree's code is.
    return [sys.executable, "-P", "-c", code, *args], {"PYTHONPATH": f"{checkout}:{checkout}/runtime"}


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--base", required=True, help="the earlier commit to compare with")
    parser.add_argument("--sha", default="HEAD", help="the commit under test (default HEAD)")
    parser.add_argument("--hosts", type=int, default=20)
    parser.add_argument("--forks", type=int, default=20)
    parser.add_argument("--repeat", type=int, default=5, help="re-runs of each; the medians are compared")
    parser.add_argument("--logs", type=Path, default=Path(tempfile.gettempdir()) / "soulfleet-bench-logs")
    args = parser.parse_args(argv)
    base, sha = resolve_sha(args.base), resolve_sha(args.sha)
    args.logs.mkdir(parents=True, exist_ok=True)
    print(f"base {base[:12]} against {sha[:12]}, {args.hosts} hosts each; logs in {args.logs}", flush=True)
    with tempfile.TemporaryDirectory(prefix="soulfleet-ab-") as tmp, Lab(args.hosts) as lab_base, \
            Lab(args.hosts) as lab_sha:
        worktree = Path(tmp) / "base"
        subprocess.run(["git", "-C", str(REPO), "worktree", "add", "--detach", "-f", str(worktree), base],
                       check=True, capture_output=True, timeout=120)
        try:
            sides = {}
            for name, lab, checkout, commit in (("base", lab_base, worktree, base), ("sha", lab_sha, None, sha)):
                inventory = lab.write_inventory(Path(tmp) / f"{name}.yml")
                reset_hosts(lab.hosts)
                command, env = update_command(checkout, inventory, commit, args.forks)
                seconds, rc, _ = timed(command, args.logs / f"ab-{name}-first.log", env)
                if rc != 0:
                    raise SystemExit(f"the first deploy of {name} failed (exit {rc}): see {args.logs}/ab-{name}-first.log")
                print(f"  {name} ({commit[:12]}) deployed in {seconds:.1f} s", flush=True)
                sides[name] = (command, env, [])
            for i in range(args.repeat):
                for name, (command, env, samples) in sides.items():
                    log = args.logs / f"ab-{name}-rerun{i + 1}.log"
                    seconds, rc, out = timed(command, log, env)
                    if rc != 0 or fleet_changed(out) != 0:
                        raise SystemExit(f"a re-run of {name} was not a clean no-change run: see {log}")
                    samples.append(seconds)
                    print(f"  {name:4} re-run {i + 1}: {seconds:.2f} s  load {os.getloadavg()[0]:.1f}", flush=True)
        finally:
            subprocess.run(["git", "-C", str(REPO), "worktree", "remove", "--force", str(worktree)],
                           capture_output=True, timeout=120)
    old, new = statistics.median(sides["base"][2]), statistics.median(sides["sha"][2])
    print()
    print(f"machine: {machine_line(ansible=False)}; --forks {args.forks}")
    print("| hosts | commit | no-change re-run (median) | runs |")
    print("|---:|---|---:|---|")
    for name, commit, median in (("base", base, old), ("sha", sha, new)):
        runs = " / ".join(f"{s:.2f}" for s in sides[name][2])
        print(f"| {args.hosts} | {commit[:12]} ({name}) | {median:.2f} s | {runs} |")
    print(f"\n{sha[:12]} takes {new / old:.2f}x the time of {base[:12]}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
