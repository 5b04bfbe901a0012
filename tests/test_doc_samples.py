"""The command-output samples in README.md and docs/ are what the commands print now
(scripts/doc_samples.py makes them; `scripts/refresh-docs` writes them into the pages)."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT / "scripts"))
import doc_sample_index  # noqa: E402
import doc_samples  # noqa: E402
from tests.conftest import skip_or_fail  # noqa: E402

MARKED = [(path, name, text) for path in doc_samples.pages() for name, text in doc_samples.samples_in(path)]


def test_every_marker_names_a_sample_and_every_sample_is_shown_once():
    names = [name for _path, name, _text in MARKED]
    assert sorted(set(names) - set(doc_sample_index.SAMPLES)) == []
    assert sorted(set(doc_sample_index.SAMPLES) - set(names)) == []  # a sample no page shows is dead code
    assert len(names) == len(set(names))


@pytest.mark.parametrize("path,name,text", [
    pytest.param(path, name, text, marks=[pytest.mark.lab] if name in doc_sample_index.LAB else [])
    for path, name, text in MARKED], ids=[name for _p, name, _t in MARKED])
def test_the_page_shows_what_the_commands_print_now(path, name, text):
    try:
        fresh = doc_sample_index.make(name)
    except doc_samples.SampleSkipped as exc:
        skip_or_fail(str(exc))
    assert doc_samples.normalised(text) == doc_samples.normalised(fresh), (
        f"{path.relative_to(ROOT)}: the sample {name!r} is stale; run scripts/refresh-docs {name}")


def test_the_order_of_different_hosts_lines_is_not_compared_but_each_hosts_is():
    ran = "sflabg01: backed up\nsflabg02: backed up\nsflabg01: CHANGED\n\nHOST"
    assert doc_samples.normalised(ran) == doc_samples.normalised(
        "sflabg02: backed up\nsflabg01: backed up\nsflabg01: CHANGED\n\nHOST")
    assert doc_samples.normalised(ran) != doc_samples.normalised(
        "sflabg01: CHANGED\nsflabg02: backed up\nsflabg01: backed up\n\nHOST")


def test_only_what_differs_between_runs_is_masked():
    shown = '{\n  "path": "/tmp/demo/b/soul-20261201T210132Z.json",\n  "seq": 4,\n  "lock_seconds": 3.7e-05\n}'
    rerun = '{\n  "path": "/tmp/demo/b/soul-20261202T080000Z.json",\n  "seq": 4,\n  "lock_seconds": 0.002\n}'
    assert doc_samples.normalised(shown) == doc_samples.normalised(rerun)
    assert doc_samples.normalised(shown) != doc_samples.normalised(shown.replace('"seq": 4', '"seq": 5'))
    assert doc_samples.normalised("schema 3") != doc_samples.normalised("schema 4")
    listing = "-rw------- 1 root root 374 Dec  1 21:01 soul.json"
    assert doc_samples.normalised(listing) == doc_samples.normalised("-rw------- 1 ci ci 9 Jan 12 09:30 soul.json")
    assert doc_samples.normalised(listing) != doc_samples.normalised(listing.replace("-rw-------", "-rw-r--r--"))


def test_refresh_rewrites_only_the_marked_block():
    page = "intro\n<!-- sample: restore -->\n```\nold output\n```\nafter\n```\nunmarked\n```\n"
    assert doc_samples.replaced(page, {"restore": "$ new\nnew output\n"}) == (
        "intro\n<!-- sample: restore -->\n```\n$ new\nnew output\n```\nafter\n```\nunmarked\n```\n")


def test_check_names_a_stale_sample_and_exits_1(tmp_path):
    """The command a developer runs: a page whose sample no longer matches fails, naming it,
    and --check writes nothing."""
    (tmp_path / "docs").mkdir()
    page = tmp_path / "docs" / "page.md"
    page.write_text("<!-- sample: engine-library -->\n```\nn2 match 9.999 something else\n```\n", encoding="utf-8")
    (tmp_path / "README.md").write_text("nothing marked\n", encoding="utf-8")
    proc = subprocess.run([sys.executable, str(ROOT / "scripts" / "refresh_docs.py"), "--check", "--root", str(tmp_path)],
                          capture_output=True, text=True, timeout=120)
    assert proc.returncode == 1, proc.stderr
    assert "docs/page.md (engine-library)" in proc.stdout and "1 stale" in proc.stderr
    assert "9.999" in page.read_text(encoding="utf-8")
    proc = subprocess.run([sys.executable, str(ROOT / "scripts" / "refresh_docs.py"), "--root", str(tmp_path)],
                          capture_output=True, text=True, timeout=120)
    assert proc.returncode == 0, proc.stderr
    assert "n2 match 2.747" in page.read_text(encoding="utf-8")
    page.write_text("<!-- sample: no-such-sample -->\n```\nx\n```\n", encoding="utf-8")
    proc = subprocess.run([sys.executable, str(ROOT / "scripts" / "refresh_docs.py"), "--check", "--root", str(tmp_path)],
                          capture_output=True, text=True, timeout=120)
    assert proc.returncode == 2 and "no-such-sample" in proc.stderr
