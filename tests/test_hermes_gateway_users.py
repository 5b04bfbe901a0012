"""Two users of one Hermes gateway each get their own memories back, and only theirs.

Hermes 0.19.0's own gateway (`hermes gateway run`, tests/hermes_gateway.py) serves one home
with the soul graph as its memory provider (installed by our installer) and the local model
stub (tests/openai_stub.py) as its model. Users reach it the two ways a gateway can be
driven from loopback:

- the API server (POST /v1/chat/completions): Hermes names no user there, so the provider
  keys the user by the caller's X-Hermes-Session-Key, scope `api_server:key:<key>`;
- webhook routes: Hermes names the route's user `webhook:<route>`, scope
  `webhook:webhook:<route>`.

Alice tells a secret; it is stored in her scope. Bob asks about it in a new session: nothing
Hermes sends the model for him (system prompt with the provider's snapshot, and the message
with its prefetched recall) holds it. Alice asks in a new session: what Hermes sends holds it.
A shared memory (scope "") reaches both.
"""

from __future__ import annotations

import json
import time
import uuid
from pathlib import Path

import pytest

from soulgraph.hermes.install import install
from soulgraph.memory.write import remember
from soulgraph.store import SoulFile
from tests import hermes_chat, hermes_gateway
from tests.openai_stub import OpenAIStub, is_agent_turn, request_text, text_reply

pytestmark = pytest.mark.hermes

API_KEY = "soulfleet-test-key-0123456789"
SHARED = "The office wifi network is called tangerine-42."  # a password told in prose is refused (scanner)
STORE_TIMEOUT = 30.0  # s: a turn reaches soul.json (the provider writes in the background)
QUIET = 1.0  # s without a new model request: the gateway is done with the last message
QUIET_TIMEOUT = 15.0


@pytest.fixture(scope="module")
def gateway(hermes_exe, tmp_path_factory):
    """One gateway: API server and webhook routes alice and bob, on free loopback ports."""
    with OpenAIStub(takes_script=is_agent_turn, default_reply="Noted.") as stub:
        home = hermes_chat.make_stub_home(tmp_path_factory.mktemp("gw") / "home", stub.base_url)
        report = install(home)
        assert report["memory_provider"] == "selected" and report["plugin"] == "installed", report
        with SoulFile(home / "soul.json").change() as graph:
            remember(graph, SHARED, writer="test", kind="semantic_fact")  # the operator's: shared
        api_port, hook_port = hermes_gateway.free_port(), hermes_gateway.free_port()
        hermes_chat.set_config(home, hermes_gateway.webhook_config(hook_port, {"alice": "{message}",
                                                                                "bob": "{message}"}))
        with hermes_gateway.Gateway(home, extra_env=hermes_gateway.api_server_env(api_port, API_KEY)) as gw:
            gw.api = f"http://127.0.0.1:{api_port}"
            gw.hooks = f"http://127.0.0.1:{hook_port}"
            gw.stub = stub
            hermes_gateway.wait_healthy(gw.api + "/health", gateway=gw)
            hermes_gateway.wait_healthy(gw.hooks + "/health", gateway=gw)
            yield gw


# ---------------------------------------------------------------- helpers

def turns(home, needle: str) -> list:
    graph = SoulFile(home / "soul.json").graph()
    return [n for n in graph.nodes.values() if n.source == "hermes:sync_turn" and needle in n.content]


def wait_stored(gw, needle: str) -> list:
    """The stored turns holding needle, once there is one (bounded poll of soul.json)."""
    deadline = time.monotonic() + STORE_TIMEOUT
    while time.monotonic() < deadline:
        found = turns(gw.home, needle)
        if found:
            return found
        time.sleep(0.2)
    raise AssertionError(f"no turn holding {needle!r} stored within {STORE_TIMEOUT:.0f}s\n"
                         f"{gw.log_tail()}\n{memory_log(gw)}")


def memory_log(gw) -> str:
    path = gw.home / "logs" / "soulgraph-memory.log"
    try:
        return f"--- {path} ---\n{path.read_text(errors='replace')[-3000:]}"
    except OSError:
        return f"(no {path})"


def settle(gw) -> None:
    """Wait until the model has had no request for QUIET s: the side calls of the last
    message (a webhook session's title) are in."""
    deadline = time.monotonic() + QUIET_TIMEOUT
    count, since = len(gw.stub.chat_requests), time.monotonic()
    while time.monotonic() < deadline:
        time.sleep(0.1)
        now = len(gw.stub.chat_requests)
        if now != count:
            count, since = now, time.monotonic()
        elif time.monotonic() - since >= QUIET:
            return
    raise AssertionError(f"the gateway kept calling the model for {QUIET_TIMEOUT:.0f}s")


def everything(body: dict) -> str:
    """All a request tells the model: each message's text (the system prompt with the
    provider's snapshot; the user's message with its prefetched recall), and the raw body."""
    return request_text(body) + "\n" + json.dumps(body, ensure_ascii=False)


def around(text: str, needle: str, width: int = 300) -> str:
    at = text.find(needle)
    return f"...{text[max(0, at - width):at + len(needle) + width]}..."


def requests_for(gw, start: int, question: str, earlier: list[str]) -> list[str]:
    """The texts of the model requests, from index start on, made for the message asking
    question (its agent turn and side calls), once its agent turn has come and the gateway has
    gone quiet. Every other request since start must belong to an earlier message."""
    deadline = time.monotonic() + hermes_gateway.REQUEST_TIMEOUT
    while not any(is_agent_turn(s.body) and question in request_text(s.body) for s in gw.stub.chat_requests[start:]):
        if time.monotonic() > deadline:
            raise AssertionError(f"the model never saw {question!r}\n{gw.log_tail()}")
        time.sleep(0.1)
    settle(gw)
    texts = [everything(s.body) for s in gw.stub.chat_requests[start:]]
    others = [t for t in texts if question not in t]
    stray = [t[:1500] for t in others if not any(e in t for e in earlier)]
    assert not stray, f"model requests that belong to no message sent: {stray}"
    earlier.append(question)
    return [t for t in texts if question in t]


def ask_api(gw, key: str, text: str, reply: str) -> str:
    """One message through the API server as the caller with session key `key`; the
    session id Hermes gave it."""
    gw.stub.add_replies(text_reply(reply))
    answer = hermes_gateway.post_json(gw.api + "/v1/chat/completions",
                                      {"model": "hermes-agent", "messages": [{"role": "user", "content": text}]},
                                      {"Authorization": f"Bearer {API_KEY}", "X-Hermes-Session-Key": key})
    assert answer.status == 200, f"HTTP {answer.status}: {answer.text[:500]}\n{gw.log_tail()}"
    gw.track_children()
    assert answer.json()["choices"][0]["message"]["content"] == reply, answer.text[:500]
    return answer.headers.get("X-Hermes-Session-Id", "")


def ask_webhook(gw, route: str, text: str, reply: str) -> str:
    """One delivery to a webhook route (answered 202 at once; the agent runs after)."""
    gw.stub.add_replies(text_reply(reply))
    answer = hermes_gateway.post_json(gw.hooks + f"/webhooks/{route}", {"message": text},
                                      {"X-Request-ID": f"{route}-{uuid.uuid4().hex}"})
    assert answer.status == 202, f"HTTP {answer.status}: {answer.text[:500]}\n{gw.log_tail()}"
    gw.track_children()
    return ""


# Every secret an alice told so far, in either test: no bob may ever see one.
TOLD: list[str] = []


def kept_apart(gw, ask, alice: str, bob: str, *, told: str, secrets: tuple[str, ...], bob_asks: str,
               alice_asks: str, alice_scope: str, bob_scope: str) -> tuple[str, str]:
    """The scenario; the session ids of bob's and alice's questions (API server only)."""
    earlier: list[str] = TOLD + [told]
    # 1. Alice tells; her turn is stored in her scope.
    start = len(gw.stub.chat_requests)
    ask(gw, alice, told, "Noted, I will remember that.")
    (turn,) = wait_stored(gw, secrets[0])
    assert turn.scope == alice_scope, (turn.scope, turn.content)
    assert all(s in turn.content for s in secrets), turn.content
    requests_for(gw, start, told, earlier)
    TOLD.extend(secrets)

    # 2. Bob, a new session: nothing Hermes sends the model for him holds an alice's secret.
    start = len(gw.stub.chat_requests)
    bob_reply = f"I have nothing about that for you yet ({uuid.uuid4().hex[:8]})."
    bob_session = ask(gw, bob, bob_asks, bob_reply)
    seen = requests_for(gw, start, bob_asks, earlier)
    leaks = [around(text, s) for text in seen for s in TOLD if s in text]
    assert not leaks, "bob's requests to the model hold alice's memories:\n" + "\n".join(leaks)
    assert any(SHARED in text for text in seen), "the shared memory did not reach bob"
    (bob_turn,) = wait_stored(gw, bob_reply)
    assert bob_turn.scope == bob_scope, (bob_turn.scope, bob_turn.content)

    # 3. Alice, a new session: her secret comes back (snapshot or prefetch); bob's turn does not.
    start = len(gw.stub.chat_requests)
    alice_session = ask(gw, alice, alice_asks, "You told me where it is.")
    seen = requests_for(gw, start, alice_asks, earlier)
    assert any(secrets[-1] in text for text in seen), (
        "alice's new session did not get her memory back:\n" + "\n".join(around(t, alice_asks, 1500) for t in seen))
    assert any(SHARED in text for text in seen), "the shared memory did not reach alice"
    assert not any(bob_reply in text for text in seen), "alice's requests hold bob's turn"
    return bob_session, alice_session


# ---------------------------------------------------------------- tests

def test_api_server_callers_with_their_own_session_keys_get_only_their_own_memories(gateway):
    bob_session, alice_session = kept_apart(
        gateway, ask_api, "alice-phone", "bob-laptop",
        told="My locker combination at the gym is 4-19-33 and I keep my passport in the blue drawer.",
        secrets=("4-19-33", "blue drawer"), bob_asks="Where is my passport?", alice_asks="Where is my passport?",
        alice_scope="api_server:key:alice-phone", bob_scope="api_server:key:bob-laptop")
    # Hermes derives the session id from the first message alone: bob's session and alice's
    # second one are the same session to it, and still two users to the soul graph.
    assert bob_session and bob_session == alice_session
    # The API server makes an agent, and so a provider, per request and never shuts one down:
    # all of them share one memory service (not one child left behind per request).
    services = [pid for pid in hermes_gateway._descendants(gateway.process.pid)
                if b"soulgraph.hermes.memory_service" in Path(f"/proc/{pid}/cmdline").read_bytes()]
    assert len(services) == 1, services


def test_webhook_routes_are_users_of_their_own(gateway):
    # The questions differ: a webhook session's title request (a side call after the
    # answer) must be told apart from the next user's requests.
    kept_apart(
        gateway, ask_webhook, "alice", "bob",
        told="My bike lock code is 7-7-21 and my spare key is under the red flowerpot.",
        secrets=("7-7-21", "red flowerpot"), bob_asks="Where is my spare key?",
        alice_asks="Where did I leave my spare key?", alice_scope="webhook:webhook:alice",
        bob_scope="webhook:webhook:bob")
