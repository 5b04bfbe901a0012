"""The memory provider keeps a turn until the memory service acknowledged it: the plugin
(hermes/plugin/__init__.py), loaded by Hermes' own plugin loader in Hermes' venv, writes
through a service that is killed with SIGKILL at random moments, and every turn ends up in
the soul graph exactly once. The queue is bounded: when the service cannot be started, the
oldest turn is dropped and logged, and the agent never waits."""

from __future__ import annotations

import json
import os
import random
import select
import signal
import subprocess
import sys
import textwrap
import time
from pathlib import Path

from soulgraph.store import SoulFile
from tests import hermes_client
from tests.test_hermes_provider import install_plugin

SESSION = "kill-session"
RUN_TIMEOUT = 300

# Runs in Hermes' venv. Sends turns (paced, so kills land among them) until the test says it
# has killed enough, then waits for the queue to be acknowledged. The service's answers are
# watched (not changed) to count the turns it recognised as stored already.
KILL_DRIVER = textwrap.dedent("""
    import json, logging, os, random, sys, time
    from pathlib import Path
    from plugins.memory import load_memory_provider
    home, control = sys.argv[1], Path(sys.argv[2])
    warnings = []
    class Keep(logging.Handler):
        def emit(self, record):
            warnings.append(record.getMessage())
    logging.getLogger().addHandler(Keep(logging.WARNING))
    provider = load_memory_provider("soulgraph")
    provider.initialize("%(session)s", hermes_home=home, platform="cli", user_id="u1")
    stored = {"now": 0, "already": 0}
    call = provider.client.call
    def watched(op, args=None, **kw):
        result = call(op, args, **kw)
        if op == "sync_turn":
            stored[result.get("stored", "now")] += 1
        return result
    provider.client.call = watched
    random.seed(int(sys.argv[3]))
    sent, slowest = 0, 0.0
    deadline = time.monotonic() + %(timeout)d
    while (sent < int(sys.argv[4]) or not (control / "kills-done").exists()) and time.monotonic() < deadline:
        started = time.monotonic()
        provider.sync_turn(f"turn {sent}: the build number is {sent * 7}", f"noted {sent}", session_id="%(session)s")
        slowest = max(slowest, time.monotonic() - started)
        sent += 1
        (control / "sent").write_text(str(sent))
        time.sleep(random.uniform(0, 0.03))
    # getattr: the same driver measures a plugin without a queue of unacknowledged writes.
    out = {"sent": sent, "flushed": provider.flush(120), "pending": getattr(provider, "pending", lambda: 0)(),
           "dropped": getattr(provider, "dropped", 0),
           "stored": stored, "slowest_sync_turn_s": slowest,
           "retries": sum("will retry" in w for w in warnings)}
    provider.shutdown()
    print(json.dumps(out))
""") % {"session": SESSION, "timeout": RUN_TIMEOUT - 60}


def hermes_python() -> Path:
    return hermes_client.ensure_hermes_venv().parent / "python"


def python_wrapper(path: Path, script: str, **values: object) -> Path:
    """A shell script the plugin is told is its Python: `script` filled with `values` and ours."""
    path.write_text(script % {"python": sys.executable, **{k: str(v) for k, v in values.items()}})
    path.chmod(0o755)
    return path


def drive(hermes_home: Path, driver: str, *args: object, timeout: float = 120) -> dict:
    """Run `driver` in Hermes' own venv against `hermes_home`; its last line, read as JSON."""
    proc = subprocess.run([str(hermes_python()), "-c", driver, str(hermes_home), *map(str, args)],
                          capture_output=True, text=True, timeout=timeout, env=hermes_client.hermes_env(hermes_home))
    assert proc.returncode == 0, proc.stderr[-3000:]
    return json.loads(proc.stdout.strip().splitlines()[-1])


def service_pids(soul_file: Path) -> list[int]:
    """The memory services of this test (their command line names its own soul file)."""
    found = []
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            argv = (entry / "cmdline").read_bytes().split(b"\0")
        except OSError:
            continue
        if b"soulgraph.hermes.memory_service" in argv and str(soul_file).encode() in argv:
            found.append(int(entry.name))
    return found


def turns_in(soul_file: Path) -> list[str]:
    graph = SoulFile(soul_file).graph()
    return [n.content for n in graph.nodes.values() if n.source == "hermes:sync_turn"]


def test_a_service_killed_at_random_moments_loses_no_turn_and_stores_none_twice(hermes_home, tmp_path):
    soul_file = hermes_home / "soul.json"
    install_plugin(hermes_home, soul_file)
    control = tmp_path / "control"
    control.mkdir()
    seed = random.randrange(1 << 30)
    driver = subprocess.Popen([str(hermes_python()), "-c", KILL_DRIVER, str(hermes_home), str(control), str(seed),
                               "150"], stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                              env=hermes_client.hermes_env(hermes_home))
    kills, wanted = 0, 16
    chooser = random.Random(seed)
    try:
        deadline = time.monotonic() + RUN_TIMEOUT - 60
        while kills < wanted and driver.poll() is None and time.monotonic() < deadline:
            time.sleep(chooser.uniform(0.05, 0.4))
            for pid in service_pids(soul_file):
                try:
                    os.kill(pid, signal.SIGKILL)
                    kills += 1
                except ProcessLookupError:
                    pass  # ended by itself in between
        (control / "kills-done").write_text(str(kills))
        out, err = driver.communicate(timeout=RUN_TIMEOUT)
    finally:
        if driver.poll() is None:
            driver.kill()
            driver.wait(10)
    assert driver.returncode == 0, err[-3000:]
    result = json.loads(out.strip().splitlines()[-1])
    print(f"seed {seed}: {kills} kills, {result}")
    assert kills >= wanted, (kills, err[-2000:])
    assert result["flushed"] is True and result["pending"] == 0 and result["dropped"] == 0, result
    assert result["retries"] >= 1  # kills did land on writes in flight
    assert result["slowest_sync_turn_s"] < 0.05  # queued: the agent never waited on a dead service
    stored = turns_in(soul_file)
    expected = [f"User: turn {i}: the build number is {i * 7}\nAssistant: noted {i}" for i in range(result["sent"])]
    missing = sorted(set(expected) - set(stored), key=expected.index)
    twice = sorted({t for t in stored if stored.count(t) > 1})
    assert not missing and not twice, (f"{len(missing)} lost, {len(twice)} stored twice", missing[:3], twice[:3])
    assert len(stored) == result["sent"]
    # In order: each turn built on the one before, numbered without gaps.
    graph = SoulFile(soul_file).graph()
    by_text = {n.content: n for n in graph.nodes.values() if n.source == "hermes:sync_turn"}
    refs = [by_text[t].source_ref for t in expected]
    assert refs == [f"{SESSION}#{i + 1}" for i in range(result["sent"])]


# A "python" for the plugin's settings: the real service, except that the first time it has
# stored a turn it dies before the answer leaves (SIGKILL of itself: the write is on disk, the
# acknowledgement is lost), the case the turn id exists for.
DIES_AFTER_WRITE = textwrap.dedent("""\
    #!%(python)s
    import os, signal, subprocess, sys, threading
    marker = %(marker)r
    if os.path.exists(marker):
        os.execv(%(python)r, [%(python)r] + sys.argv[1:])
    child = subprocess.Popen([%(python)r] + sys.argv[1:], stdin=subprocess.PIPE, stdout=subprocess.PIPE)
    def relay():
        for line in sys.stdin.buffer:
            child.stdin.write(line)
            child.stdin.flush()
        child.stdin.close()
    threading.Thread(target=relay, daemon=True).start()
    for line in child.stdout:
        if b'"stored": "now"' in line:
            open(marker, "w").close()
            child.kill()
            os.kill(os.getpid(), signal.SIGKILL)
        sys.stdout.buffer.write(line)
        sys.stdout.buffer.flush()
""")

ONE_TURN_DRIVER = textwrap.dedent("""
    import json, sys
    from plugins.memory import load_memory_provider
    provider = load_memory_provider("soulgraph")
    provider.initialize("s1", hermes_home=sys.argv[1], platform="cli", user_id="u1")
    results = []
    call = provider.client.call
    def watched(op, args=None, **kw):
        result = call(op, args, **kw)
        if op == "sync_turn":
            results.append(result["stored"])
        return result
    provider.client.call = watched
    provider.sync_turn("The release train leaves on Thursdays", "Noted.", session_id="s1")
    out = {"flushed": provider.flush(60), "stored": results}
    provider.shutdown()
    print(json.dumps(out))
""")


def test_a_turn_stored_by_a_service_that_died_before_answering_is_not_stored_again(hermes_home, tmp_path):
    soul_file = hermes_home / "soul.json"
    marker = tmp_path / "died-once"
    wrapper = python_wrapper(tmp_path / "dies-after-write", DIES_AFTER_WRITE, marker=marker)
    install_plugin(hermes_home, soul_file, python=str(wrapper))
    out = drive(hermes_home, ONE_TURN_DRIVER, timeout=180)
    assert marker.exists()  # the first service did die after its write
    assert out == {"flushed": True, "stored": ["already"]}, out  # the resend was recognised
    assert turns_in(soul_file) == ["User: The release train leaves on Thursdays\nAssistant: Noted."]


# A "python" that cannot run the service until the test lets it: a service down for a while.
DOWN_UNTIL_ALLOWED = textwrap.dedent("""\
    #!/bin/sh
    [ -e %(allow)s ] || exit 1
    exec %(python)s "$@"
""")

BOUND_DRIVER = textwrap.dedent("""
    import json, logging, sys, time
    from pathlib import Path
    from plugins.memory import load_memory_provider
    warnings = []
    class Keep(logging.Handler):
        def emit(self, record):
            warnings.append(record.getMessage())
    logging.getLogger().addHandler(Keep(logging.WARNING))
    provider = load_memory_provider("soulgraph")
    module = sys.modules[type(provider).__module__]
    provider.initialize("s1", hermes_home=sys.argv[1], platform="cli", user_id="u1")
    total = module.MAX_PENDING + 5
    started = time.monotonic()
    for n in range(total):
        provider.sync_turn(f"turn {n} while the service is down", "ok", session_id="s1")
    queued_s = time.monotonic() - started
    out = {"bound": module.MAX_PENDING, "total": total, "queued_s": queued_s, "pending": provider.pending(),
           "dropped": provider.dropped, "dropped_logged": sum("dropped the oldest" in w for w in warnings)}
    Path(sys.argv[2]).write_text("")  # the service can start now
    out["flushed"] = provider.flush(240)
    out["pending_after"] = provider.pending()
    provider.shutdown()
    print(json.dumps(out))
""")


def test_the_queue_keeps_the_newest_turns_up_to_its_bound_while_the_service_is_down(hermes_home, tmp_path):
    soul_file = hermes_home / "soul.json"
    allow = tmp_path / "service-may-start"
    wrapper = python_wrapper(tmp_path / "down-until-allowed", DOWN_UNTIL_ALLOWED, allow=allow)
    install_plugin(hermes_home, soul_file, python=str(wrapper))
    out = drive(hermes_home, BOUND_DRIVER, allow, timeout=RUN_TIMEOUT)
    assert out["bound"] == 1000 and out["pending"] == 1000 and out["dropped"] == 5 == out["dropped_logged"], out
    assert out["queued_s"] < 2.0  # 1,005 turns queued without waiting on the dead service
    assert out["flushed"] is True and out["pending_after"] == 0, out
    stored = turns_in(soul_file)
    text = "User: turn {} while the service is down\nAssistant: ok".format
    # The five oldest waiting went (the one being sent at that moment, if any, is not "waiting").
    assert len(stored) == len(set(stored)) == 1000
    assert {text(n) for n in range(6, 1005)} <= set(stored) and len({text(n) for n in range(6)} & set(stored)) == 1


def test_a_restarted_service_recognises_a_turn_its_killed_predecessor_stored(tmp_path):
    """The turn id lives in the soul file (the memory's metadata), not in the process."""
    soul_file = tmp_path / "soul.json"

    def start():
        return subprocess.Popen([sys.executable, "-m", "soulgraph.hermes.memory_service", "--soul-file",
                                 str(soul_file), "--no-embed"], stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                                text=True)

    def ask(service, args):
        service.stdin.write(json.dumps({"id": 1, "op": "sync_turn", "args": args}) + "\n")
        service.stdin.flush()
        ready, _, _ = select.select([service.stdout], [], [], 30)
        assert ready, "no answer within 30 s"
        return json.loads(service.stdout.readline())["result"]

    turn = {"user": "the VPN config is in vault/net", "assistant": "ok", "session_id": "s", "turn_id": "t-42"}
    first = start()
    written = ask(first, turn)
    first.send_signal(signal.SIGKILL)
    first.wait(10)
    second = start()
    try:
        again = ask(second, turn)
    finally:
        second.stdin.close()
        second.wait(10)
    assert (written["stored"], again["stored"], again["id"]) == ("now", "already", written["id"])
    assert turns_in(soul_file) == ["User: the VPN config is in vault/net\nAssistant: ok"]


AGAIN_DRIVER = textwrap.dedent("""
    import json, sys
    from plugins.memory import load_memory_provider
    provider = load_memory_provider("soulgraph")
    provider.initialize("s1", hermes_home=sys.argv[1], platform="cli", user_id="u1")
    provider.sync_turn("first session turn", "ok", session_id="s1")
    provider.shutdown()
    provider.initialize("s2", hermes_home=sys.argv[1], platform="cli", user_id="u1")
    provider.sync_turn("second session turn", "ok", session_id="s2")
    out = {"flushed": provider.flush(30)}
    provider.shutdown()
    print(json.dumps(out))
""")


def test_a_provider_initialized_again_after_shutdown_writes_again(hermes_home):
    soul_file = hermes_home / "soul.json"
    install_plugin(hermes_home, soul_file)
    assert drive(hermes_home, AGAIN_DRIVER) == {"flushed": True}
    assert sorted(turns_in(soul_file)) == ["User: first session turn\nAssistant: ok",
                                           "User: second session turn\nAssistant: ok"]
