"""What a large soul's load costs with and without its load image (engine/load_image.py).

    .venv/bin/python bench/bench_load_image.py [--size 100000] [--rounds 3]

A synthetic soul of `--size` memories (bench/synthetic.py) is written once. Then, in each round,
three fresh processes load it in turn with `SoulFile(path).graph()`, each timed from before the
file is read to the graph in hand:

  parsed        no image beside the soul: the file is parsed and checked, the index built
                (a tool's load; the baseline)
  1st start     as the MCP server and the memory service load (`keep_image=True`) with no image
                yet: the same, and the image written (what a start after a new snapshot pays)
  from image    the same load with the image the 1st start left

The image is removed before each `parsed` and `1st start` load. Each process prints its load's
seconds, its VmRSS after the load and its peak (VmHWM). Medians over the rounds.
"""

from __future__ import annotations

import argparse
import json
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

import synthetic  # noqa: E402
from soulgraph.store import SoulFile  # noqa: E402
from soulgraph.store.image_file import image_path  # noqa: E402

LOADER = r"""
import json, sys, time
from soulgraph.store import SoulFile
def status(field):
    for line in open("/proc/self/status"):
        if line.startswith(field):
            return int(line.split()[1]) / 1024
started = time.perf_counter()
graph = SoulFile(sys.argv[1], keep_image=sys.argv[2] == "keep").graph()
print(json.dumps({"load": time.perf_counter() - started, "rss": status("VmRSS"), "peak": status("VmHWM"),
                  "memories": len(graph.nodes)}))
"""
TIMEOUT = 600.0  # seconds one load may take


def load(path: Path, keep: bool) -> dict:
    proc = subprocess.run([sys.executable, "-c", LOADER, str(path), "keep" if keep else "read"],
                          capture_output=True, text=True, timeout=TIMEOUT)
    if proc.returncode:
        raise RuntimeError(f"the load failed: {proc.stderr[-2000:]}")
    return json.loads(proc.stdout.strip().splitlines()[-1])


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--size", type=int, default=100_000, help="memories in the soul (default 100,000)")
    parser.add_argument("--rounds", type=int, default=3, help="loads of each kind (default 3)")
    args = parser.parse_args()
    with tempfile.TemporaryDirectory(prefix="soulbench-image-") as folder:
        path = Path(folder) / "soul.json"
        started = time.perf_counter()
        SoulFile(path).save(synthetic.build(args.size))
        print(f"{args.size:,} memories, {path.stat().st_size / 1e6:.1f} MB, built in {time.perf_counter() - started:.1f} s; "
              f"{args.rounds} rounds, the three loads in turn")
        rows: dict[str, list[dict]] = {"parsed": [], "1st start": [], "from image": []}
        image_mb = 0.0
        for _ in range(args.rounds):
            image_path(path).unlink(missing_ok=True)
            rows["parsed"].append(load(path, keep=False))
            rows["1st start"].append(load(path, keep=True))
            image_mb = image_path(path).stat().st_size / 1e6
            rows["from image"].append(load(path, keep=True))
        print(f"the image: {image_mb:.1f} MB\n")
        header = f"{'load':<10} | {'s':>6} | {'x parsed':>8} | {'VmRSS MB':>8} | {'peak MB':>7}"
        print(header)
        print("-" * len(header))
        base = statistics.median(run["load"] for run in rows["parsed"])
        for name, runs in rows.items():
            seconds = statistics.median(run["load"] for run in runs)
            print(f"{name:<10} | {seconds:>6.2f} | {seconds / base:>8.2f} | "
                  f"{statistics.median(run['rss'] for run in runs):>8.1f} | {statistics.median(run['peak'] for run in runs):>7.1f}")
        print(f"\nmedians of {args.rounds}; a fresh process each: SoulFile(path).graph(), from before the read to the graph")
    return 0


if __name__ == "__main__":
    sys.exit(main())
