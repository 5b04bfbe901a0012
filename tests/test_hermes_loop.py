"""Real Hermes agent sessions against a local model stub, watched by a PROBE memory provider.

Hermes (hermes-agent 0.19.0, its own venv) runs as a real CLI process: `hermes chat -q`,
`hermes -z`, `hermes cron run`. Its model is tests/openai_stub.py on 127.0.0.1, which
plays scripted assistant replies (text and OpenAI tool calls) and records every request.
The PROBE plugin, written by each test into $HERMES_HOME/plugins/probe/ and selected with
`memory.provider: probe`, appends every lifecycle call it receives to calls.jsonl beside
itself. What these tests established is written down in docs/hermes-facts.md, section
"Driving a real Hermes session against a local model stub".
"""

from __future__ import annotations

import json
import subprocess
import textwrap
from pathlib import Path

import pytest

from tests import hermes_chat, hermes_client
from tests.openai_stub import (OpenAIStub, call, is_agent_turn, message_text, request_text,
                               text_reply, tool_reply)

pytestmark = pytest.mark.hermes

# Each Hermes process gets this hard deadline (process group killed past it).
RUN_TIMEOUT = 60

PROBE_BLOCK = "PROBE-BLOCK: the probe provider is active."
PROBE_RECALL = "PROBE-RECALL for query: "
PROBE_PRE_COMPRESS = "PROBE-PRECOMPRESS insight"

PROBE_INIT = textwrap.dedent('''
    """PROBE: a memory provider that records every lifecycle call as one JSON line."""
    import json
    import os
    import threading
    import time
    from pathlib import Path

    from agent.memory_provider import MemoryProvider

    LOG = Path(__file__).with_name("calls.jsonl")
    BLOCK = BLOCK_TEXT
    RECALL = RECALL_TEXT
    PRE_COMPRESS = PRE_COMPRESS_TEXT


    def _plain(value):
        try:
            json.dumps(value)
            return value
        except (TypeError, ValueError):
            return "<callable>" if callable(value) else repr(value)


    def _messages(messages):
        out = []
        for m in messages or []:
            content = m.get("content")
            text = content if isinstance(content, str) else json.dumps(content)
            out.append({"role": m.get("role"), "content": (text or "")[:400],
                        "tool_calls": [tc.get("function", {}).get("name")
                                       for tc in (m.get("tool_calls") or [])],
                        "tool_call_id": m.get("tool_call_id")})
        return out


    def log(event, **data):
        record = {"event": event, "t": time.time(), "pid": os.getpid(),
                  "thread": threading.current_thread().name}
        record.update({k: _plain(v) for k, v in data.items()})
        fd = os.open(str(LOG), os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o600)
        try:
            os.write(fd, (json.dumps(record) + "\\n").encode())
        finally:
            os.close(fd)


    class ProbeProvider(MemoryProvider):
        @property
        def name(self):
            return "probe"

        def is_available(self):
            return True

        def initialize(self, session_id, **kwargs):
            log("initialize", session_id=session_id, kwargs={k: _plain(v) for k, v in kwargs.items()})

        def system_prompt_block(self):
            log("system_prompt_block")
            return BLOCK

        def prefetch(self, query, *, session_id=""):
            log("prefetch", query=query, session_id=session_id)
            return RECALL + query

        def queue_prefetch(self, query, *, session_id=""):
            log("queue_prefetch", query=query, session_id=session_id)

        def sync_turn(self, user_content, assistant_content, *, session_id="", messages=None):
            log("sync_turn", user=user_content, assistant=assistant_content, session_id=session_id,
                messages=None if messages is None else _messages(messages))

        def get_tool_schemas(self):
            return []

        def shutdown(self):
            log("shutdown")

        def on_turn_start(self, turn_number, message, **kwargs):
            log("on_turn_start", turn_number=turn_number, message=message,
                kwargs={k: _plain(v) for k, v in kwargs.items()})

        def on_session_end(self, messages):
            log("on_session_end", messages=_messages(messages))

        def on_session_switch(self, new_session_id, *, parent_session_id="", reset=False,
                              rewound=False, **kwargs):
            log("on_session_switch", new_session_id=new_session_id,
                parent_session_id=parent_session_id, reset=reset, rewound=rewound,
                kwargs={k: _plain(v) for k, v in kwargs.items()})

        def on_pre_compress(self, messages):
            log("on_pre_compress", messages=_messages(messages))
            return PRE_COMPRESS

        def on_memory_write(self, action, target, content, metadata=None):
            log("on_memory_write", action=action, target=target, content=content, metadata=metadata)

        def on_delegation(self, task, result, *, child_session_id="", **kwargs):
            log("on_delegation", task=task, result=result, child_session_id=child_session_id)


    def register(ctx):
        ctx.register_memory_provider(ProbeProvider())
''').replace("BLOCK_TEXT", repr(PROBE_BLOCK)).replace("RECALL_TEXT", repr(PROBE_RECALL)) \
    .replace("PRE_COMPRESS_TEXT", repr(PROBE_PRE_COMPRESS))

PROBE_YAML = "name: probe\ndescription: Records every memory-provider call (soulfleet test probe)\nversion: 0.0.1\n"


# --------------------------------------------------------------------------
# Helpers
# --------------------------------------------------------------------------

def install_probe(home: Path) -> Path:
    folder = home / "plugins" / "probe"
    folder.mkdir(parents=True, exist_ok=True)
    (folder / "__init__.py").write_text(PROBE_INIT)
    (folder / "plugin.yaml").write_text(PROBE_YAML)
    hermes_chat.set_config(home, {"memory": {"provider": "probe"}})
    return folder / "calls.jsonl"


def probe_calls(home: Path) -> list[dict]:
    log = home / "plugins" / "probe" / "calls.jsonl"
    if not log.exists():
        return []
    return [json.loads(line) for line in log.read_text().splitlines() if line.strip()]


def events(calls: list[dict], name: str) -> list[dict]:
    return [c for c in calls if c["event"] == name]


def order(calls: list[dict]) -> list[str]:
    return [c["event"] for c in calls]


def first_index(calls: list[dict], name: str) -> int:
    return order(calls).index(name)


def assert_ok(run: hermes_chat.HermesRun) -> None:
    assert not run.timed_out and run.returncode == 0, run.describe()


@pytest.fixture
def home_for(hermes_exe, tmp_path):
    """Make a stub-backed Hermes home with the probe installed: home_for(stub, **config)."""

    def make(stub: OpenAIStub, **kwargs) -> Path:
        home = hermes_chat.make_stub_home(tmp_path / "home", stub.base_url, **kwargs)
        install_probe(home)
        return home

    return make


# --------------------------------------------------------------------------
# The stub alone, through the real OpenAI SDK of Hermes' venv
# --------------------------------------------------------------------------

SDK_DRIVER = textwrap.dedent('''
    import json, sys
    from openai import OpenAI
    client = OpenAI(base_url=sys.argv[1], api_key="k", max_retries=0, timeout=20)
    out = {"models": [m.id for m in client.models.list()]}
    whole = client.chat.completions.create(model="stub-model", messages=[{"role": "user", "content": "hi"}])
    out["whole"] = [whole.choices[0].message.content, whole.choices[0].finish_reason, whole.usage.prompt_tokens]
    stream = client.chat.completions.create(model="stub-model", messages=[{"role": "user", "content": "go"}],
                                            stream=True, stream_options={"include_usage": True})
    name, args, finish, usage = "", "", None, None
    for chunk in stream:
        if chunk.usage:
            usage = chunk.usage.prompt_tokens
        for choice in chunk.choices:
            for tc in choice.delta.tool_calls or []:
                name += tc.function.name or ""
                args += tc.function.arguments or ""
            finish = choice.finish_reason or finish
    out["stream"] = [name, json.loads(args), finish, usage]
    out["default"] = client.chat.completions.create(
        model="stub-model", messages=[{"role": "user", "content": "more"}]).choices[0].message.content
    print(json.dumps(out))
''')


def test_the_stub_speaks_the_openai_sdk(hermes_exe, tmp_path):
    python = str(Path(hermes_exe).parent / "python")
    replies = [text_reply("A whole answer, longer than one chunk."),
               tool_reply(call("memory", {"action": "add", "target": "user", "content": "likes tea"}),
                          usage={"prompt_tokens": 12345})]
    with OpenAIStub(replies=replies, default_reply="Default.") as stub:
        proc = subprocess.run([python, "-c", SDK_DRIVER, stub.base_url], capture_output=True, text=True,
                              timeout=RUN_TIMEOUT, stdin=subprocess.DEVNULL,
                              env=hermes_client.hermes_env(tmp_path / "home"))
        assert proc.returncode == 0, proc.stderr[-3000:]
        out = json.loads(proc.stdout.strip().splitlines()[-1])
        assert out["models"] == ["stub-model"]
        assert out["whole"][:2] == ["A whole answer, longer than one chunk.", "stop"]
        assert out["stream"] == ["memory", {"action": "add", "target": "user", "content": "likes tea"},
                                 "tool_calls", 12345]
        assert out["default"] == "Default."
        assert [bool(s.scripted) for s in stub.chat_requests] == [True, True, False]
        assert stub.requests[1]["stream"] is True and stub.remaining == 0


# --------------------------------------------------------------------------
# (a) + (e) one-shot `hermes chat -q`: prompt block, prefetch, sync_turn, session end
# --------------------------------------------------------------------------

def test_one_shot_chat_feeds_the_provider_and_ends_the_session(home_for):
    query = "What do you remember about tea?"
    answer = "You like green tea, says the stub."
    with OpenAIStub(replies=[text_reply(answer)]) as stub:
        home = home_for(stub)
        run = hermes_chat.chat_once(home, query, timeout=RUN_TIMEOUT)
    assert_ok(run)
    assert run.stdout.strip().splitlines()[-1] == answer
    assert run.session_id

    # What reached the "model": one agent request, streamed, with the agent's tools.
    (body,) = stub.requests
    assert body["model"] == hermes_chat.STUB_MODEL and body["stream"] is True
    assert body["stream_options"] == {"include_usage": True}
    assert "memory" in [t["function"]["name"] for t in body["tools"]]
    system, user = body["messages"]
    assert system["role"] == "system" and PROBE_BLOCK in system["content"]
    # Prefetched text is appended to the API copy of the user message, fenced.
    assert user["role"] == "user" and user["content"].startswith(query + "\n\n<memory-context>\n")
    assert user["content"].rstrip().endswith(PROBE_RECALL + query + "\n</memory-context>")
    assert PROBE_RECALL not in system["content"]
    assert stub.chat_requests[0].headers.get("Authorization") == f"Bearer {hermes_chat.STUB_API_KEY}"

    calls = probe_calls(home)
    (init,) = events(calls, "initialize")
    assert init["session_id"] == run.session_id
    assert init["kwargs"]["agent_context"] == "primary"
    assert init["kwargs"]["platform"] == "cli"
    assert init["kwargs"]["hermes_home"] == str(home)
    assert [p["query"] for p in events(calls, "prefetch")] == [query]
    (turn,) = events(calls, "sync_turn")
    assert (turn["user"], turn["assistant"], turn["session_id"]) == (query, answer, run.session_id)
    assert [(m["role"], m["content"]) for m in turn["messages"]] == [("user", query), ("assistant", answer)]
    assert [q["query"] for q in events(calls, "queue_prefetch")] == [query]
    (end,) = events(calls, "on_session_end")
    assert [(m["role"], m["content"]) for m in end["messages"]] == [("user", query), ("assistant", answer)]
    # The order of a one-shot session; `chat -q` flushes pending syncs before on_session_end.
    sequence = ["initialize", "system_prompt_block", "on_turn_start", "prefetch", "sync_turn",
                "queue_prefetch", "on_session_end", "shutdown"]
    assert order(calls) == sequence, order(calls)
    assert events(calls, "sync_turn")[0]["thread"] != "MainThread"  # a background worker
    assert not events(calls, "on_pre_compress") and not events(calls, "on_memory_write")


# --------------------------------------------------------------------------
# (b) a scripted call of the built-in `memory` tool -> on_memory_write
# --------------------------------------------------------------------------

def test_memory_tool_call_is_mirrored_to_on_memory_write(home_for):
    fact = "The user prefers green tea in the morning."
    memory_call = call("memory", {"action": "add", "target": "memory", "content": fact})
    with OpenAIStub(replies=[tool_reply(memory_call), text_reply("Saved.")]) as stub:
        home = home_for(stub)
        run = hermes_chat.chat_once(home, "Remember that I prefer green tea in the morning.",
                                    timeout=RUN_TIMEOUT)
    assert_ok(run)
    assert run.stdout.strip().splitlines()[-1] == "Saved."

    first, second = stub.requests
    assistant, tool = second["messages"][-2:]
    assert assistant["tool_calls"][0]["id"] == memory_call["id"]
    assert tool["role"] == "tool" and tool["tool_call_id"] == memory_call["id"]
    assert json.loads(tool["content"])["success"] is True

    calls = probe_calls(home)
    (write,) = events(calls, "on_memory_write")
    assert (write["action"], write["target"], write["content"]) == ("add", "memory", fact)
    meta = write["metadata"]
    assert meta["write_origin"] == "assistant_tool" and meta["tool_name"] == "memory"
    assert meta["session_id"] == run.session_id and meta["tool_call_id"] == memory_call["id"]
    assert meta["platform"] == "cli" and meta["execution_context"] == "foreground"
    # The built-in store wrote it too, and the turn's sync carries the tool exchange.
    assert fact in (home / "memories" / "MEMORY.md").read_text()
    (turn,) = events(calls, "sync_turn")
    assert [m["role"] for m in turn["messages"]] == ["user", "assistant", "tool", "assistant"]
    assert turn["messages"][1]["tool_calls"] == ["memory"]
    assert first_index(calls, "on_memory_write") < first_index(calls, "sync_turn")


# --------------------------------------------------------------------------
# (c) context compression in a short session -> on_pre_compress
# --------------------------------------------------------------------------

def test_compression_calls_on_pre_compress_and_feeds_its_text_to_the_summary(home_for):
    # A 64,000-token window (learned from GET /v1/models) gives a threshold of 54,400
    # tokens. The third tool-call reply reports 60,000 prompt tokens, so Hermes compresses
    # after running that tool. A ~15K-token user message in the middle of 7 messages,
    # with protect_first_n 0 / protect_last_n 1 / target_ratio 0.1, leaves something to
    # summarise; the summary is an auxiliary call to the same stub (no tools), answered
    # with the default reply.
    notes = " ".join(f"note{i}: the sky was colour{i % 7}." for i in range(2000))
    query = "Read these notes. " + notes
    summary = "SUMMARY-FROM-STUB: the user shared colour notes."

    def todo(n: int, **kwargs):
        return tool_reply(call("todo", {"todos": [{"id": str(n), "content": f"step {n}",
                                                    "status": "pending"}]}), **kwargs)

    replies = [todo(1), todo(2), todo(3, usage={"prompt_tokens": 60_000}), text_reply("Done after compaction.")]
    with OpenAIStub(replies=replies, context_length=64_000, takes_script=is_agent_turn,
                    default_reply=summary) as stub:
        home = home_for(stub, extra_config={"compression": {"protect_first_n": 0, "protect_last_n": 1,
                                                            "target_ratio": 0.1}})
        run = hermes_chat.chat_once(home, query, timeout=RUN_TIMEOUT)
    assert_ok(run)
    assert run.stdout.strip().splitlines()[-1] == "Done after compaction."
    assert stub.remaining == 0

    calls = probe_calls(home)
    pre = events(calls, "on_pre_compress")
    assert len(pre) == 1, order(calls)
    assert pre[0]["messages"][0]["role"] == "user" and pre[0]["messages"][0]["content"].startswith("Read these notes.")
    assert [m["role"] for m in pre[0]["messages"]] == ["user"] + ["assistant", "tool"] * 3

    # The summary request: the auxiliary client, not streamed, no tools, one user message
    # that quotes what on_pre_compress returned as a JSON string.
    (aux,) = [s for s in stub.chat_requests if not s.scripted]
    assert not aux.body.get("tools") and not aux.body.get("stream")
    assert f'<memory-provider-context>\n"{PROBE_PRE_COMPRESS}"\n</memory-provider-context>' in request_text(aux.body)
    # The next agent request carries the compaction handoff with the stub's summary.
    last = stub.requests[-1]
    assert summary in request_text(last) and "[CONTEXT COMPACTION" in request_text(last)

    # Boundary hooks: end-of-session extraction, then a session switch. Hermes 0.19.0
    # compacts in place by default (compression.in_place: true), so the id stays.
    (switch,) = events(calls, "on_session_switch")
    assert switch["kwargs"] == {"reason": "compression"} and switch["reset"] is False
    assert switch["new_session_id"] == switch["parent_session_id"] == run.session_id
    ends = [i for i, name in enumerate(order(calls)) if name == "on_session_end"]
    assert len(ends) == 2  # the compaction boundary, then the exit
    assert first_index(calls, "on_pre_compress") < ends[0] < first_index(calls, "on_session_switch") < ends[1]
    assert order(calls)[-1] == "shutdown"


# --------------------------------------------------------------------------
# (d) a cron job: runs against the stub, but without any memory provider
# --------------------------------------------------------------------------

def test_a_cron_job_runs_against_the_stub_with_no_memory_provider(home_for):
    prompt = "Summarise the overnight build results."
    with OpenAIStub(replies=[text_reply("CRON-REPORT: all builds green.")]) as stub:
        home = home_for(stub)
        job_id = hermes_chat.cron_create(home, prompt, name="probe-job")
        run = hermes_chat.cron_run(home, job_id, timeout=RUN_TIMEOUT)
    assert_ok(run)
    assert run.extra["outcome"] == "succeeded", run.describe()

    # The job's agent turn reached the stub: not streamed, the cron preamble, our prompt.
    (body,) = stub.requests
    assert not body.get("stream")
    system, user = body["messages"]
    assert message_text(user).endswith(prompt)
    assert "no user present" in system["content"]
    # cron/scheduler.py builds the job's AIAgent with skip_memory=True: no provider is
    # loaded, so nothing ever reaches it (and agent_context "cron" is never passed).
    assert PROBE_BLOCK not in request_text(body) and "<memory-context>" not in request_text(body)
    assert probe_calls(home) == []
    outputs = list((home / "cron" / "output" / job_id).glob("*.md"))
    assert len(outputs) == 1 and "CRON-REPORT: all builds green." in outputs[0].read_text()


# --------------------------------------------------------------------------
# (e) `hermes -z` one-shot: the session ends through the provider too
# --------------------------------------------------------------------------

def test_oneshot_z_initialises_and_ends_the_provider(home_for):
    query = "Say hello in one word."
    with OpenAIStub(replies=[text_reply("Hello.")]) as stub:
        home = home_for(stub)
        run = hermes_chat.run_bounded(home, "-z", query, timeout=RUN_TIMEOUT)
    assert_ok(run)
    assert run.stdout == "Hello.\n" and run.stderr == ""  # -z prints the reply only

    calls = probe_calls(home)
    (init,) = events(calls, "initialize")
    assert init["kwargs"]["agent_context"] == "primary" and init["kwargs"]["platform"] == "cli"
    (end,) = events(calls, "on_session_end")
    assert [(m["role"], m["content"]) for m in end["messages"]] == [("user", query), ("assistant", "Hello.")]
    (turn,) = events(calls, "sync_turn")
    assert (turn["user"], turn["assistant"]) == (query, "Hello.")
    # -z does not flush pending syncs before on_session_end (chat -q does), so those two
    # may come in either order; shutdown_all drains the sync worker, so shutdown is last.
    assert order(calls)[-1] == "shutdown"
    assert order(calls)[:4] == ["initialize", "system_prompt_block", "on_turn_start", "prefetch"]
