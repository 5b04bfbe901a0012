"""`scripts/refresh-docs [--check] [NAME…]`: the pages' command-output samples, made afresh.

Without `--check` each stale sample (one that differs, times and shas aside) is rewritten with
what the commands print now (atomically, so an interrupted run leaves every page whole). With
`--check` nothing is written: each stale sample is named with a diff, and the exit status is 1. A marker naming no known sample is an error (exit 2).
"""

from __future__ import annotations

import argparse
import difflib
import os
import sys
import tempfile
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
import doc_samples  # noqa: E402
import doc_sample_index  # noqa: E402


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--check", action="store_true", help="compare only; exit 1 when a sample is stale")
    parser.add_argument("--root", type=Path, default=doc_samples.ROOT, help="the checkout whose pages are read (default: this one)")
    parser.add_argument("names", nargs="*", help="only these samples (default: every marked one)")
    args = parser.parse_args(argv)
    root = args.root.resolve()
    marked = {path: doc_samples.samples_in(path) for path in doc_samples.pages(root)}
    unknown = sorted({f"{path.relative_to(root)}: {name}" for path, found in marked.items()
                      for name, _ in found if name not in doc_sample_index.SAMPLES})
    wanted = set(args.names) or {name for found in marked.values() for name, _ in found}
    missing = sorted(set(args.names) - set(doc_sample_index.SAMPLES))
    if unknown or missing:
        for problem in unknown:
            print(f"refresh-docs: {problem} names no sample in scripts/doc_samples.py", file=sys.stderr)
        for name in missing:
            print(f"refresh-docs: no sample is called {name!r}", file=sys.stderr)
        return 2
    fresh = {}
    for name in sorted(wanted):
        try:
            fresh[name] = doc_sample_index.make(name)
        except doc_samples.SampleSkipped as exc:  # left as the page shows it, and said so
            print(f"refresh-docs: {name}: not made ({exc})", file=sys.stderr)
    stale = 0
    for path, found in marked.items():
        shown = path.relative_to(root)
        for name, text in found:
            if name in fresh and doc_samples.normalised(text) != doc_samples.normalised(fresh[name]):
                stale += 1
                if args.check:
                    diff = difflib.unified_diff(text.splitlines(), fresh[name].splitlines(), f"{shown} ({name})",
                                                "what the commands print now", lineterm="")
                    print("\n".join(diff))
        # Only a stale sample is rewritten: a page does not change with every run's times.
        # A sample named on the command line is rewritten all the same (its figures brought up to date).
        changed = {name: fresh[name] for name, text in found if name in fresh and (
            name in args.names or doc_samples.normalised(text) != doc_samples.normalised(fresh[name]))}
        if not args.check and changed:
            page = path.read_text(encoding="utf-8")
            new = doc_samples.replaced(page, changed)
            if new != page:
                _write(path, new)
                print(f"refresh-docs: {shown}: samples rewritten")
    if args.check:
        print(f"refresh-docs: {len(fresh)} sample(s) made, {stale} stale", file=sys.stderr)
    return 1 if args.check and stale else 0


def _write(path: Path, text: str) -> None:
    fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=f".{path.name}.")
    try:
        with os.fdopen(fd, "w", encoding="utf-8") as handle:
            handle.write(text)
        os.chmod(tmp, path.stat().st_mode & 0o777)
        os.replace(tmp, path)
    except BaseException:
        os.unlink(tmp)
        raise


if __name__ == "__main__":
    sys.exit(main())
