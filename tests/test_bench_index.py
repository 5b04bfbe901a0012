"""bench/'s entry point (bench/__main__.py) lists every benchmark there is, and only those."""

import importlib.util
import subprocess
import sys
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
BENCH = REPO / "bench"


def _index():
    spec = importlib.util.spec_from_file_location("bench_index", BENCH / "__main__.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_every_script_is_listed_and_every_entry_has_a_script():
    index = _index()
    scripts = {p.stem for p in BENCH.glob("*.py")} - {"__main__"}
    assert not set(index.BENCHES) & set(index.HELPERS)
    assert scripts - set(index.BENCHES) - set(index.HELPERS) == set(), "add it to bench/__main__.py"
    assert set(index.BENCHES) - scripts == set(), "listed in bench/__main__.py, no such script"
    assert set(index.HELPERS) - scripts == set()


def test_every_quoting_page_exists():
    for name, bench in _index().BENCHES.items():
        for page in bench.quoted_in.split(", "):
            assert (REPO / page).is_file(), (name, page)
            assert f"{name}.py" in (REPO / page).read_text(), (name, page)


def test_listing_runs_and_names_every_benchmark():
    index = _index()
    for command in ([sys.executable, "-m", "bench"], [str(BENCH / "run")]):
        out = subprocess.run(command, cwd=REPO, capture_output=True, text=True, timeout=60)
        assert out.returncode == 0, out.stderr
        names = {line.split()[0] for line in out.stdout.splitlines()[2:] if line.strip()}
        assert set(index.BENCHES) <= names


def test_an_unknown_name_is_refused():
    out = subprocess.run([sys.executable, "-m", "bench", "no_such_bench"], cwd=REPO,
                         capture_output=True, text=True, timeout=60)
    assert out.returncode == 2 and "no benchmark" in out.stderr
