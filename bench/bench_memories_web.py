"""The memories web page at 100,000 memories: the first page load and a search, against the
same library calls in-process (the CLI's list and search, without its process start).

    .venv/bin/python bench/bench_memories_web.py [--size 100000] [--runs 7] [--questions 20] [--no-browser]

A synthetic soul (bench/synthetic.py; 1 in 50 memories pinned, 1 in 20 a preference, 1 in 10 a
user's) is saved to a temporary soul.json and served by the real command
(`python -m soulgraph.memories --soul-file F serve`) on a loopback port. Words only: no vectors
file is made (the page loads the vectors as the CLI does, when their file is there).

- first page: a new visitor's every request in turn, as the page makes them: the URL with the
  token (303 and the cookie), the page, its CSS and script, /api/session, and the list the page
  opens on (/api/search: the newest 50). The baseline: `reading.listing` and `shown.brief` of
  those 50, in-process on the same graph.
- in chromium (unless --no-browser, or chromium and chromedriver are missing): from the URL to
  the list drawn (the page's own `data-ready`), in a headless Debian chromium via selenium.
- search: /api/search?q=QUESTION for each question; the baseline `reading.search` in-process.
- the other views' endpoints, once each per run: the graph to depth 2, the timeline, pinned and
  the snapshot, health.

Each figure is the p50 over the runs (the questions, for search); goals: the first page under
300 ms, a search under 100 ms.
"""

from __future__ import annotations

import argparse
import http.client
import json
import os
import socket
import re
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from urllib.parse import urlencode

sys.path.insert(0, str(Path(__file__).resolve().parent))

import synthetic  # noqa: E402
from soulgraph.memories import open_target, reading, shown  # noqa: E402
from soulgraph.store import SoulFile  # noqa: E402

GOALS = {"first page": 0.300, "search": 0.100}


def p50(samples: list[float]) -> float:
    return statistics.median(samples)


def make_soul(size: int, folder: Path) -> Path:
    graph = synthetic.build(size)
    for position, node_id in enumerate(list(graph.nodes)):
        changes = {}
        if position % 20 == 2:
            changes["kind"] = "preference"
        elif position % 50 == 3:
            changes["kind"] = "project"
        if position % 10 == 5:
            changes["scope"] = f"telegram:{1000 + position % 7}"
        if changes:
            graph.update(node_id, **changes)
        if position % 50 == 0:
            graph.pin(node_id)
    path = folder / "soul.json"
    SoulFile(path).save(graph)
    return path


def start(soul: Path) -> tuple[subprocess.Popen, str]:
    process = subprocess.Popen([sys.executable, "-m", "soulgraph.memories", "--soul-file", str(soul), "serve"],
                               stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    deadline = time.monotonic() + 300
    while time.monotonic() < deadline:
        line = process.stdout.readline()
        if not line:
            break
        found = re.search(r"http://\S+\?token=\S+", line)
        if found:
            return process, found.group(0)
    process.kill()
    raise SystemExit("the server printed no URL: " + process.stderr.read())


class Client:
    """One keep-alive connection with the session cookie, as a browser tab has (stdlib
    http.client with TCP_NODELAY: a client that waits on delayed ACKs adds 40 ms a request)."""

    def __init__(self, url: str):
        address, self.token = url.split("/?token=")
        host, port = address.removeprefix("http://").rsplit(":", 1)
        self.connection = http.client.HTTPConnection(host, int(port), timeout=60)
        self.connection.connect()
        self.connection.sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        self.cookie = ""

    def get(self, path: str) -> tuple[int, bytes]:
        self.connection.request("GET", path, headers={"Cookie": self.cookie} if self.cookie else {})
        response = self.connection.getresponse()
        body = response.read()
        cookie = response.getheader("set-cookie")
        if cookie:
            self.cookie = cookie.split(";", 1)[0]
        return response.status, body

    def close(self) -> None:
        self.connection.close()


def first_page(url: str) -> float:
    started = time.perf_counter()
    client = Client(url)
    try:
        assert client.get(f"/?token={client.token}")[0] == 303
        for path in ("/", "/static/style.css", "/static/app.js", "/api/session"):
            status, _ = client.get(path)
            assert status == 200, (path, status)
        status, body = client.get("/api/search")
        assert status == 200 and len(json.loads(body)["results"]) == 50
    finally:
        client.close()
    return time.perf_counter() - started


def in_browser(url: str, runs: int) -> list[float] | str:
    chromium, chromedriver = "/usr/bin/chromium", "/usr/bin/chromedriver"
    if not (os.access(chromium, os.X_OK) and os.access(chromedriver, os.X_OK)):
        return "no chromium/chromedriver"
    try:
        from selenium import webdriver
        from selenium.webdriver.chrome.service import Service
        from selenium.webdriver.support.ui import WebDriverWait
    except ImportError:
        return "no selenium"
    os.environ["SE_OFFLINE"] = "true"
    profile = tempfile.mkdtemp(prefix="bench-chromium-")
    options = webdriver.ChromeOptions()
    options.binary_location = chromium
    for flag in ("--headless", "--no-sandbox", "--disable-gpu", "--disable-background-networking",
                 "--disable-component-update", "--disable-sync", "--no-first-run", "--disable-quic",
                 "--disable-dev-shm-usage", f"--user-data-dir={profile}", "--window-size=1280,900"):
        options.add_argument(flag)
    driver = webdriver.Chrome(service=Service(executable_path=chromedriver), options=options)
    samples = []
    try:
        base = url.split("/?token=")[0]
        driver.get(base + "/static/style.css")  # the origin open once, so delete_all_cookies applies
        for _ in range(runs):
            driver.delete_all_cookies()
            driver.execute_script("window.localStorage && localStorage.clear()")
            started = time.perf_counter()
            driver.get(url)
            WebDriverWait(driver, 60).until(lambda d: d.execute_script("return document.body.dataset.ready") == "search")
            samples.append(time.perf_counter() - started)
    finally:
        driver.quit()
        shutil.rmtree(profile, ignore_errors=True)
    return samples


def timed(call, runs: int) -> float:
    samples = []
    for _ in range(runs):
        started = time.perf_counter()
        call()
        samples.append(time.perf_counter() - started)
    return p50(samples)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--size", type=int, default=100_000)
    parser.add_argument("--runs", type=int, default=7)
    parser.add_argument("--questions", type=int, default=20)
    parser.add_argument("--no-browser", action="store_true")
    args = parser.parse_args()
    folder = Path(tempfile.mkdtemp(prefix="bench-memories-web-"))
    try:
        made = time.perf_counter()
        soul = make_soul(args.size, folder)
        print(f"python {sys.version.split()[0]}; {args.size:,} memories ({soul.stat().st_size / 1e6:.1f} MB soul.json, "
              f"made in {time.perf_counter() - made:.1f} s); p50 of {args.runs} runs, {args.questions} questions; ms",
              flush=True)
        # Baselines: the CLI's calls in-process on the same graph.
        target = open_target(soul_file=soul)
        graph = target.soul.graph()
        questions = synthetic.questions(args.questions)

        def listing():
            nodes, _total = reading.listing(graph, limit=50)
            return [shown.brief(graph, n) for n in nodes]

        base_list = timed(listing, args.runs)
        base_search = p50([timed(lambda q=q: [shown.brief(graph, h.node) for h in reading.search(graph, q)], 1)
                           for q in questions])
        process, url = start(soul)
        try:
            base, token = url.split("/?token=")
            cold = first_page(url)
            pages = [first_page(url) for _ in range(args.runs)]
            client = Client(url)
            client.get(f"/api/session?token={token}")
            searches = []
            for question in questions:
                started = time.perf_counter()
                assert client.get("/api/search?" + urlencode({"q": question}))[0] == 200
                searches.append(time.perf_counter() - started)
            center = f"n{args.size // 2}"
            views = {name: timed(lambda path=path: client.get(path), args.runs)
                     for name, path in (("graph, depth 2", f"/api/graph/{center}?depth=2"),
                                        ("timeline", "/api/timeline"), ("pinned + snapshot", "/api/pinned"),
                                        ("memory page", f"/api/memory/{center}"), ("health", "/api/health"))}
            client.close()
            browser = "skipped (--no-browser)" if args.no_browser else in_browser(url, args.runs)
        finally:
            process.terminate()
            process.wait(timeout=30)
        rows = [("first page (6 requests)", p50(pages), base_list, "listing + brief of 50, in-process", "first page"),
                ("  the first one after start", cold, None, "", None),
                ("search", p50(searches), base_search, "reading.search + brief, in-process", "search")]
        if isinstance(browser, list):
            rows.insert(2, ("first page in chromium", p50(browser), None, "URL to the list drawn", "first page"))
        rows += [(name, seconds, None, "", None) for name, seconds in views.items()]
        print(f"{'what':<28} | {'page ms':>8} | {'baseline ms':>11} | {'goal':>6} | baseline")
        print("-" * 96)
        for name, seconds, baseline, what, goal in rows:
            goal_text = "" if goal is None else f"<{GOALS[goal] * 1e3:.0f}" + (" ok" if seconds < GOALS[goal] else " NO")
            base_text = "" if baseline is None else f"{baseline * 1e3:.1f}"
            print(f"{name:<28} | {seconds * 1e3:>8.1f} | {base_text:>11} | {goal_text:>6} | {what}")
        if not isinstance(browser, list):
            print(f"chromium: {browser}")
    finally:
        shutil.rmtree(folder, ignore_errors=True)


if __name__ == "__main__":
    main()
