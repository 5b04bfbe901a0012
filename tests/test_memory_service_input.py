"""The memory service (hermes/memory_service.py) as a real process on bad input: every line it
can read is answered, a bad one with an error naming the problem (id null when the id cannot
be read), each refusal is one line on stderr, and no input ends the process."""

from __future__ import annotations

import json
import os
import select
import subprocess
import sys
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings, strategies as st

from soulgraph.hermes.memory_service import ARGS, MAX_LINE_CHARS

ANSWER_DEADLINE = 30.0  # seconds for one answer: a broken service fails the test, never hangs it


class Service:
    """`python -m soulgraph.hermes.memory_service` on a fresh soul file, spoken to in raw bytes."""

    def __init__(self, folder: Path) -> None:
        self.stderr_path = folder / "service.log"
        self._stderr = open(self.stderr_path, "wb")
        self.process = subprocess.Popen(
            [sys.executable, "-m", "soulgraph.hermes.memory_service", "--soul-file", str(folder / "soul.json"),
             "--no-embed"], stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=self._stderr)
        self._buffer = b""

    def send(self, line: bytes) -> None:
        self.process.stdin.write(line if line.endswith(b"\n") else line + b"\n")
        self.process.stdin.flush()

    def answer(self) -> dict:
        """The next answer line, within ANSWER_DEADLINE seconds."""
        fd = self.process.stdout.fileno()
        while b"\n" not in self._buffer:
            ready, _, _ = select.select([fd], [], [], ANSWER_DEADLINE)
            assert ready, f"no answer within {ANSWER_DEADLINE:g} s; service log:\n{self.log()[-2000:]}"
            chunk = os.read(fd, 1 << 16)
            assert chunk, f"the service ended (exit {self.process.wait(5)}); its log:\n{self.log()[-2000:]}"
            self._buffer += chunk
        line, self._buffer = self._buffer.split(b"\n", 1)
        return json.loads(line)

    def status_after(self, tag: str) -> None:
        self.send(json.dumps({"id": tag, "op": "status"}).encode())
        answer = self.answer()
        assert answer["id"] == tag and answer["ok"] is True, answer

    def log(self) -> str:
        self._stderr.flush()
        return self.stderr_path.read_text(encoding="utf-8", errors="replace")

    def close(self) -> int:
        self.process.stdin.close()
        code = self.process.wait(30)
        self._stderr.close()
        return code


@pytest.fixture
def service(tmp_path):
    running = Service(tmp_path)
    yield running
    if running.process.poll() is None:
        running.process.kill()
        running.process.wait(10)


def request(op, args=None, **fields):
    body = {"id": fields.pop("id", 7), "op": op, **fields}
    if args is not None:
        body["args"] = args
    return json.dumps(body).encode()


# (name, the line sent, the id the error must carry, words the error must hold)
CORPUS = [
    ("not JSON at all", b"garbage", None, "not JSON"),
    ("a separator character alone (whitespace to Python, not to JSON)", b"\x1c", None, "not JSON"),
    ("cut-off JSON", b'{"id": 1, "op": "sta', None, "not JSON"),
    ("JSON with junk after it", b'{"id": 1, "op": "status"} trailing', None, "not JSON: Extra data"),
    ("bytes that are not UTF-8", b"\xff\xfe\x00\x81", None, "not JSON"),
    ("a NUL byte", b'{"id": 1,\x00 "op": "status"}', None, "not JSON"),
    ("nesting deeper than JSON can", b"[" * 100_000 + b"]" * 100_000, None, "not JSON"),
    ("an integer of 5,000 digits", b'{"id": ' + b"9" * 5000 + b', "op": "status"}', None, "not JSON"),
    ("an array", b'["status", 1]', None, "a request must be a JSON object, not a list"),
    ("a string", b'"status"', None, "a request must be a JSON object, not a string"),
    ("a number", b"42", None, "a request must be a JSON object, not an integer"),
    ("null", b"null", None, "a request must be a JSON object, not null"),
    ("true", b"true", None, "a request must be a JSON object, not a boolean"),
    ("no id", b'{"op": "status"}', None, "the request has no id"),
    ("a null id", b'{"id": null, "op": "status"}', None, "id must be an integer or a string, not null"),
    ("a list id", b'{"id": [1], "op": "status"}', None, "id must be an integer or a string, not a list"),
    ("an object id", b'{"id": {"n": 1}, "op": "status"}', None, "not an object"),
    ("a boolean id", b'{"id": true, "op": "status"}', None, "not a boolean"),
    ("a fractional id", b'{"id": 1.5, "op": "status"}', None, "not a number"),
    ("an infinite id", b'{"id": 1e999, "op": "status"}', None, "not a number"),
    ("a NaN id", b'{"id": NaN, "op": "status"}', None, "not a number"),
    ("an id of 1,000 characters", request("status", id="x" * 1000), None, "longer than 200 characters"),
    ("an id with a lone surrogate", b'{"id": "a\\ud800", "op": "status"}', None, "lone surrogate"),
    ("no op", b'{"id": 7}', 7, "the request has no op (known: consolidate, hello"),
    ("a null op", request(None), 7, "the op must be a string, not null"),
    ("a number op", request(5), 7, "the op must be a string, not an integer"),
    ("a list op", request(["status"]), 7, "the op must be a string, not a list"),
    ("a misspelt op", request("recal"), 7, "unknown op 'recal' (known:"),
    ("a unicode op", request("状态☃"), 7, "unknown op '状态☃'"),
    ("a lone surrogate op", b'{"id": 7, "op": "\\udcff"}', 7, "unknown op '\\udcff'"),
    ("an extra request field", request("status", extra=1), 7, "status: unknown request field(s) 'extra'"),
    ("args a list", request("status", [1]), 7, "status: args must be a JSON object, not a list"),
    ("args a string", request("recall", "x"), 7, "recall: args must be a JSON object, not a string"),
    ("args a number", request("snapshot", 3), 7, "snapshot: args must be a JSON object, not an integer"),
    ("an arg hello does not take", request("hello", {"x": 1}), 7, "hello: unknown arg(s) 'x' (it takes: none)"),
    ("an arg status does not take", request("status", {"verbose": True}), 7, "status: unknown arg(s) 'verbose'"),
    ("recall without its query", request("recall", {}), 7, "recall: missing arg(s) query"),
    ("a misspelt recall arg", request("recall", {"quer": "x"}), 7, "recall: unknown arg(s) 'quer' (it takes: query"),
    ("recall: query a number", request("recall", {"query": 5}), 7,
     "recall: args.query must be a string, not an integer"),
    ("recall: query null", request("recall", {"query": None}), 7, "args.query must be a string, not null"),
    ("recall: query a list", request("recall", {"query": ["a"]}), 7, "args.query must be a string, not a list"),
    ("recall: budget a string", request("recall", {"query": "x", "budget": "9"}), 7,
     "args.budget must be an integer from 0 to 1,000,000, not a string"),
    ("recall: limit negative", request("recall", {"query": "x", "limit": -3}), 7, "args.limit must be an integer"),
    ("recall: limit huge", request("recall", {"query": "x", "limit": 10**30}), 7, "not an integer (1000000000000"),
    ("recall: budget infinite", b'{"id": 7, "op": "recall", "args": {"query": "x", "budget": 1e999}}', 7,
     "args.budget must be an integer from 0 to 1,000,000, not a number (inf)"),
    ("recall: limit a boolean", request("recall", {"query": "x", "limit": True}), 7, "not a boolean"),
    ("recall: skip_session a number", request("recall", {"query": "x", "skip_session": 7}), 7,
     "args.skip_session must be a string"),
    ("recall: nested junk for query", request("recall", {"query": {"a": [{"b": [[[[{"c": None}]]]]}]}}), 7,
     "args.query must be a string, not an object"),
    ("snapshot: max_chars a string", request("snapshot", {"max_chars": "2200"}), 7,
     "args.max_chars must be an integer"),
    ("snapshot: max_chars fractional", request("snapshot", {"max_chars": 1.5}), 7, "not a number (1.5)"),
    ("snapshot: max_chars huge", request("snapshot", {"max_chars": 10**40}), 7, "args.max_chars must be an integer"),
    ("sync_turn: user a number", request("sync_turn", {"user": 5}), 7, "sync_turn: args.user must be a string"),
    ("sync_turn: assistant a list", request("sync_turn", {"user": "hi", "assistant": []}), 7,
     "args.assistant must be a string, not a list"),
    ("sync_turn: session_id an object", request("sync_turn", {"user": "hi", "session_id": {}}), 7,
     "args.session_id must be a string, not an object"),
    ("sync_turn: platform a number", request("sync_turn", {"user": "hi", "platform": 1}), 7, "args.platform"),
    ("sync_turn: user_id a boolean", request("sync_turn", {"user": "hi", "user_id": False}), 7, "args.user_id"),
    ("sync_turn: messages a string", request("sync_turn", {"user": "hi", "messages": "x"}), 7,
     "args.messages must be a list of at most 100,000 message objects, not a string"),
    ("sync_turn: a message a number", request("sync_turn", {"user": "hi", "messages": [{"role": "user"}, 5]}), 7,
     "args.messages[1] must be a message object, not an integer"),
    ("sync_turn: tool_calls a number", request("sync_turn", {"user": "hi", "messages": [{"tool_calls": 5}]}), 7,
     "args.messages[0].tool_calls must be a list, not an integer"),
    ("sync_turn: a tool call a string", request("sync_turn", {"user": "hi", "messages": [{"tool_calls": ["f"]}]}), 7,
     "args.messages[0].tool_calls[0] must be an object, not a string"),
    ("sync_turn: a tool call's function a string",
     request("sync_turn", {"user": "hi", "messages": [{"tool_calls": [{"function": "f"}]}]}), 7,
     "args.messages[0].tool_calls[0].function must be an object"),
    ("sync_turn: turn_id a number", request("sync_turn", {"user": "hi", "turn_id": 5}), 7,
     "args.turn_id must be a non-empty string of at most 200 characters, not an integer"),
    ("sync_turn: turn_id empty", request("sync_turn", {"user": "hi", "turn_id": ""}), 7, "args.turn_id must be"),
    ("sync_turn: turn_id of 1,000 characters", request("sync_turn", {"user": "hi", "turn_id": "t" * 1000}), 7,
     "args.turn_id must be"),
    ("sync_turn: a lone surrogate in the user's text", b'{"id": 7, "op": "sync_turn", "args": {"user": "hi \\ud800"}}',
     7, "sync_turn: args.user holds a lone surrogate"),
    ("sync_turn: a lone surrogate deep in messages",
     b'{"id": 7, "op": "sync_turn", "args": {"user": "hi", "messages": [{"role": "tool", "content": ["\\udfff"]}]}}',
     7, "args.messages[0].content[0] holds a lone surrogate"),
    ("consolidate: session_id a number", request("consolidate", {"session_id": 5}), 7,
     "consolidate: args.session_id must be a string"),
    ("consolidate: messages an object", request("consolidate", {"messages": {}}), 7,
     "consolidate: args.messages must be a list"),
    ("memory_write without its action", request("memory_write", {"content": "x"}), 7,
     "memory_write: missing arg(s) action"),
    ("memory_write: action a number", request("memory_write", {"action": 5}), 7, "args.action must be a string"),
    ("memory_write: an unknown action", request("memory_write", {"action": "burn", "content": "x"}), 7,
     "unknown memory action 'burn' (known: add, replace, remove)"),
    ("memory_write: an unknown target", request("memory_write", {"action": "add", "target": "diary", "content": "x"}),
     7, "unknown memory target 'diary'"),
    ("memory_write: target a number", request("memory_write", {"action": "add", "target": 5}), 7, "args.target"),
    ("memory_write: content a number", request("memory_write", {"action": "add", "content": 5}), 7,
     "args.content must be a string, not an integer"),
    ("memory_write: metadata a number", request("memory_write", {"action": "add", "content": "x", "metadata": 5}), 7,
     "args.metadata must be a JSON object, not an integer"),
    ("memory_write: metadata a list", request("memory_write", {"action": "add", "content": "x", "metadata": []}), 7,
     "args.metadata must be a JSON object, not a list"),
    ("memory_write: empty content", request("memory_write", {"action": "add", "content": "  "}), 7,
     "add: the entry's content is empty"),
    ("memory_write: write_id a list", request("memory_write", {"action": "add", "content": "x", "write_id": [1]}), 7,
     "args.write_id must be a non-empty string"),
    ("a string id, echoed", request("nope", id="ünï-☃"), "ünï-☃", "unknown op 'nope'"),
    ("a huge integer id, echoed", request("nope", id=10**30), 10**30, "unknown op 'nope'"),
]
BLANK_LINES = [b"", b"   \t", b"\r"]  # not requests: no answer, and the next request answered


def test_every_malformed_request_gets_an_error_naming_it_and_the_service_lives_on(service):
    assert len(CORPUS) >= 30
    for n, (name, line, request_id, words) in enumerate(CORPUS):
        service.send(line)
        answer = service.answer()
        assert answer["ok"] is False and answer["retry"] is False, (name, answer)
        assert answer["id"] == request_id, (name, answer)
        assert words in answer["error"], (name, answer["error"])
        service.status_after(f"after-{n}")
    for n, line in enumerate(BLANK_LINES):
        service.send(line)
        service.status_after(f"after-blank-{n}")
    assert service.process.poll() is None
    refused = [line for line in service.log().splitlines() if "refused request" in line]
    assert len(refused) == len(CORPUS), service.log()[-3000:]  # one line each, and nothing else refused
    assert "recall: args.query must be a string, not an integer (5)" in service.log()
    # Nothing malformed reached the graph.
    service.send(request("status"))
    assert service.answer()["result"]["nodes"] == 0
    assert service.close() == 0


def test_the_request_the_issue_names_is_answered_and_so_is_the_next(service):
    service.send(b'{"id":4,"op":"recall","args":{"query":5}}')
    service.send(b'{"id":5,"op":"status"}')
    first, second = service.answer(), service.answer()
    assert (first["id"], first["ok"], second["id"], second["ok"]) == (4, False, 5, True)
    assert first["error"] == "recall: args.query must be a string, not an integer (5)"


def test_a_line_longer_than_the_bound_is_refused_unread_and_the_next_one_answered(service):
    service.send(b'{"id": 1, "op": "recall", "args": {"query": "' + b"a" * (MAX_LINE_CHARS + 10) + b'"}}')
    answer = service.answer()
    assert answer["id"] is None and answer["error"] == f"a request line longer than {MAX_LINE_CHARS:,} characters"
    service.status_after("after-long")


def test_good_requests_still_work_around_bad_ones(service):
    service.send(request("sync_turn", {"user": "The staging database is db-7", "assistant": "ok", "session_id": "s",
                                       "turn_id": "t1", "platform": None}))
    written = service.answer()
    assert written["ok"] and written["result"]["stored"] == "now", written
    service.send(b"[]")
    assert service.answer()["ok"] is False
    # A carriage return is JSON whitespace, not the end of a line: one request, one answer.
    service.send(b'{"id": "cr",\r"op": "status"}\r')
    answer = service.answer()
    assert answer["id"] == "cr" and answer["ok"] is True, answer
    service.status_after("after-cr")  # the next answer is this one's: no second one for half a line
    service.send(request("recall", {"query": "staging database"}))
    recalled = service.answer()
    assert recalled["ok"] and "db-7" in recalled["result"]["text"]


# ---------------------------------------------------------------------- fuzz
JSON_VALUES = st.recursive(
    st.none() | st.booleans() | st.integers(min_value=-(10**40), max_value=10**40)
    | st.floats(allow_nan=False) | st.text(max_size=30),
    lambda inner: st.lists(inner, max_size=4) | st.dictionaries(st.text(max_size=8), inner, max_size=4),
    max_leaves=12)
ARG_NAMES = sorted({name for takes, _needs in ARGS.values() for name in takes} | {"junk"})
REQUESTS = st.fixed_dictionaries(
    {"id": st.integers(min_value=0, max_value=10**6)},
    optional={"op": st.sampled_from(sorted(ARGS)) | JSON_VALUES,
              "args": st.dictionaries(st.sampled_from(ARG_NAMES), JSON_VALUES, max_size=4) | JSON_VALUES})
LINES = (REQUESTS.map(lambda r: json.dumps(r).encode()) | JSON_VALUES.map(lambda v: json.dumps(v).encode())
         | st.binary(max_size=60).map(lambda b: b.replace(b"\n", b" ")))


@settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(line=LINES)
def test_fuzz_every_line_is_answered_and_the_service_lives_on(service, line):
    if not line.strip(b" \t\r"):
        return  # a blank line (JSON whitespace only) gets no answer (test above)
    service.send(line)
    answer = service.answer()
    assert set(answer) >= {"id", "ok"} and (answer["ok"] or isinstance(answer["error"], str)), answer
    try:
        sent = json.loads(line)
    except ValueError:
        sent = None
    if isinstance(sent, dict) and isinstance(sent.get("id"), int) and not isinstance(sent.get("id"), bool):
        assert answer["id"] == sent["id"], (line, answer)
    service.status_after("after-fuzz")
    assert "failed:" not in service.log(), service.log()[-2000:]  # refused by a check, never by a fault
