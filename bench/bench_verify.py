"""`fleet verify` against `fleet status` on the same deployed lab hosts, in one invocation.

    .venv/bin/python bench/bench_verify.py                  # 20 hosts, 3 runs each, --forks 20
    .venv/bin/python bench/bench_verify.py --sizes 5,20 --repeat 5

A real SSH lab comes up (tests/lab.py; root and sshd needed), fleet-update deploys SHA to every
host (untimed) on hosts that have a Hermes home, then `fleet status` (the baseline: one read per host) and `fleet verify --sha SHA`
(every check on every host, the MCP self-check included) each run --repeat times, alternating,
with the same --forks. The table gives the medians and verify's time over status's.
"""

from __future__ import annotations

import argparse
import os
import statistics
import sys
import tempfile
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO))

from bench.bench_fleet import BIN, machine_line, reset_hosts, resolve_sha, timed  # noqa: E402
from tests.lab import Lab  # noqa: E402


def bench_size(n: int, sha: str, forks: int, repeat: int, logs: Path) -> dict[str, list[float]]:
    samples: dict[str, list[float]] = {"status": [], "verify --full": [], "verify": []}
    with Lab(n) as lab, tempfile.TemporaryDirectory(prefix="soulfleet-bench-") as tmp:
        inventory = lab.write_inventory(Path(tmp) / "inventory.yml")
        print(f"lab of {n} hosts up in {lab.timings['up']:.1f} s", flush=True)
        reset_hosts(lab.hosts)  # a Hermes home with its config.yaml on every host
        seconds, rc, _ = timed([str(BIN / "fleet-update"), "--yes", "--forks", str(forks), "-i",
                                str(inventory), "all", sha], logs / f"verify-bench-deploy-{n}.log")
        if rc != 0:
            raise SystemExit(f"the deploy failed (exit {rc}): see {logs}/verify-bench-deploy-{n}.log")
        print(f"  deployed {sha[:12]} to {n} hosts in {seconds:.1f} s", flush=True)
        commands = {
            "status": [str(BIN / "fleet"), "status", "--forks", str(forks), "-i", str(inventory)],
            "verify --full": [str(BIN / "fleet"), "verify", "--full", "--forks", str(forks), "--sha", sha, "-i",
                              str(inventory)],
            "verify": [str(BIN / "fleet"), "verify", "--forks", str(forks), "--sha", sha, "-i", str(inventory)],
        }
        for i in range(repeat):
            for name, argv in commands.items():
                log = logs / f"{name.replace(' --', '-')}-{n}-run{i + 1}.log"
                seconds, rc, _ = timed(argv, log)
                if rc != 0:
                    raise SystemExit(f"fleet {name} failed (exit {rc}) on a correct fleet: see {log}")
                samples[name].append(seconds)
                print(f"  {name:13} {n:3} hosts  {seconds:6.2f} s  load {os.getloadavg()[0]:.1f}", flush=True)
    return samples


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--sizes", default="20", help="lab sizes, comma separated (default 20)")
    parser.add_argument("--sha", default="HEAD", help="the commit to deploy and verify (default HEAD)")
    parser.add_argument("--forks", type=int, default=20, help="hosts at once, for both commands")
    parser.add_argument("--repeat", type=int, default=3, help="runs of each command; the median is reported")
    parser.add_argument("--logs", type=Path, default=Path(tempfile.gettempdir()) / "soulfleet-bench-logs")
    args = parser.parse_args(argv)
    sha = resolve_sha(args.sha)
    args.logs.mkdir(parents=True, exist_ok=True)
    print(f"sha {sha}; logs in {args.logs}", flush=True)
    rows = []
    for n in [int(s) for s in args.sizes.split(",")]:
        samples = bench_size(n, sha, args.forks, args.repeat, args.logs)
        status = statistics.median(samples["status"])
        for name, runs in samples.items():
            median = statistics.median(runs)
            rows.append(f"| {n} | fleet {name} | {median:.2f} s | {median / status:.1f}x | "
                        f"{' / '.join(f'{s:.2f}' for s in runs)} |")
    print()
    print(f"machine: {machine_line(ansible=False)}; --forks {args.forks}")
    print("| hosts | command | median | ratio (to status) | runs |")
    print("|---:|---|---:|---:|---|")
    print("\n".join(rows))
    return 0


if __name__ == "__main__":
    sys.exit(main())
