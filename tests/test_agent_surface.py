"""What the agent sees (issue 13), through the real MCP SDK client: one compact answer, strict
arguments with one-line errors, real output schemas, paging, hypotheses that can be listed and
dropped, and a JSON-RPC error for every line the server cannot parse."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time

import jsonschema
import pytest

from tests.mcp_session import with_server


def test_answers_are_one_compact_copy_and_structured_only_leaves_the_text_out(tmp_path):
    soul = tmp_path / "soul.json"

    async def both(session):
        await session.call("soul_add", content="Deploys happen on Tuesdays.", tags=["ops"])
        result = await session.client.call_tool("soul_query", {"query": "deploys"})
        text = result.content[0].text
        assert json.loads(text) == result.structured_content
        assert text == json.dumps(result.structured_content, ensure_ascii=False, separators=(",", ":"))

    async def structured_only(session):
        result = await session.client.call_tool("soul_query", {"query": "deploys"})
        assert result.content == [] and result.structured_content["results"][0]["content"] == "Deploys happen on Tuesdays."
        refused = await session.client.call_tool("soul_discover", {"node_id": "n999"})
        assert refused.is_error and "n999" in refused.content[0].text  # errors keep their text

    with_server(soul, both)
    with_server(soul, structured_only, extra_args=["--structured-only"])


REFUSALS = [
    ("soul_add", {"content": "x", "parent": ["n1"]},
     "soul_add: unknown argument 'parent'; soul_add takes content, tags, parents, pinned, kind, source, confidence, importance"),
    ("soul_add", {"content": "x", "pinned": "yes"}, 'soul_add: pinned: must be true or false, got "yes"'),
    ("soul_add", {"content": "x", "pinned": 1}, "soul_add: pinned: must be true or false, got 1"),
    ("soul_hot", {"limit": "5"}, 'soul_hot: limit: must be a whole number, got "5"'),
    ("soul_hot", {"limit": 500}, "soul_hot: limit: must be at most 100, got 500"),
    ("soul_add", {}, "soul_add: content: required"),
    ("soul_add", {"content": ""}, "soul_add: content: must not be empty"),
    ("soul_query", {"query": "x", "tag": 5}, "soul_query: tag: must be text or null, got 5"),
    ("soul_query", {"query": "x", "kind": "bogus"}, "soul_query: kind: must be one of note, axiom,"),
    ("soul_by_tag", {"tag": "ops", "cursor": "page2"}, "cursor: 'page2' is not a cursor soul_by_tag gave"),
]


def test_arguments_are_strict_and_refusals_are_one_line_that_changes_nothing(tmp_path):
    async def scenario(session):
        for name, arguments, expected in REFUSALS:
            text = await session.refused(name, **arguments)
            assert text.startswith(expected) or expected in text, (name, arguments, text)
            assert "\n" not in text and "http" not in text
        assert (await session.call("soul_summary"))["nodes"] == 0  # nothing was written

    with_server(tmp_path / "soul.json", scenario)


def test_output_schemas_describe_the_fields_and_every_answer_fits_them(tmp_path):
    async def scenario(session):
        tools = {t.name: t for t in (await session.client.list_tools()).tools}
        for tool in tools.values():
            schema = tool.output_schema
            assert schema and schema.get("properties"), f"{tool.name} publishes no fields"
            assert "\n    " not in tool.description  # no source indentation
        assert set(tools["soul_query"].output_schema["properties"]) == {"results"}
        assert {"id", "content", "tags", "created_at", "parents", "pinned"} <= set(
            tools["soul_query"].output_schema["$defs"]["Brief"]["required"])
        assert tools["soul_add"].input_schema["properties"]["pinned"]["description"]
        assert tools["soul_query"].input_schema["properties"]["hint"]["description"] != \
            tools["soul_query"].input_schema["properties"]["query"]["description"]
        first = await session.call("soul_add", content="The staging database is db-7.", tags=["ops"])
        answers = {
            "soul_prime": await session.call("soul_prime", context="staging database"),
            "soul_add": first,
            "soul_discover": await session.call("soul_discover", node_id=first["id"]),
            "soul_summary": await session.call("soul_summary"),
            "soul_by_tag": await session.call("soul_by_tag", tag="ops"),
            "soul_link": await session.call("soul_link", parent_id=first["id"],
                                            child_id=(await session.call("soul_add", content="db-7 moves to db-9."))["id"]),
        }
        for name, answer in answers.items():
            jsonschema.validate(answer, tools[name].output_schema)
        assert set(answers["soul_discover"]) == {"from", "results"}

    with_server(tmp_path / "soul.json", scenario)


def test_by_tag_pages_through_every_node_with_a_cursor(tmp_path):
    async def scenario(session):
        for i in range(23):
            await session.call("soul_add", content=f"Ops note number {i}.", tags=["ops"])
        seen, cursor, pages = [], "", 0
        while True:
            page = await session.call("soul_by_tag", tag="ops", limit=10, cursor=cursor)
            pages += 1
            assert page["total"] == 23
            seen += [n["id"] for n in page["results"]]
            cursor = page["next_cursor"]
            if cursor is None:
                break
        assert pages == 3 and len(seen) == len(set(seen)) == 23

    with_server(tmp_path / "soul.json", scenario)


def test_hypotheses_are_listed_discarded_and_promoted_in_order(tmp_path):
    async def scenario(session):
        base = await session.call("soul_add", content="The cache is cold after deploys.")
        first = (await session.call("soul_explore", content="Warming the cache halves first-hour latency.",
                                    parents=[base["id"]]))["hypothesis"]
        second = (await session.call("soul_explore", content="A warm-up job after each deploy would do it.",
                                     parents=[first["id"]]))["hypothesis"]
        listed = (await session.call("soul_summary"))["open_hypotheses"]
        assert [h["id"] for h in listed] == [second["id"], first["id"]] and listed[0]["parents"] == [first["id"]]
        # Promoting the child first would drop its edge: refused, saying what to do.
        text = await session.refused("soul_promote", node_id=second["id"])
        assert f"{second['id']!r} is built on {first['id']!r}, still a hypothesis: promote it first" in text
        assert "discard or promote it first" in await session.refused("soul_promote", node_id=first["id"], discard=True)
        promoted = await session.call("soul_promote", node_id=first["id"])
        assert promoted["parents"] == [base["id"]]
        child = await session.call("soul_promote", node_id=second["id"])
        assert child["parents"] == [first["id"]]  # the edge kept
        lost = (await session.call("soul_explore", content="Maybe it is DNS."))["hypothesis"]
        dropped = await session.call("soul_promote", node_id=lost["id"], discard=True)
        assert dropped["status"] == "discarded"
        summary = await session.call("soul_summary")
        assert summary["hypotheses"] == 0 and summary["open_hypotheses"] == []

    with_server(tmp_path / "soul.json", scenario)
    # The discard is durable: a new server sees no hypothesis.
    async def later(session):
        assert (await session.call("soul_summary"))["hypotheses"] == 0
    with_server(tmp_path / "soul.json", later)


INIT = {"jsonrpc": "2.0", "id": 0, "method": "initialize",
        "params": {"protocolVersion": "2025-06-18", "capabilities": {}, "clientInfo": {"name": "raw", "version": "1"}}}


@pytest.mark.parametrize("line, code, words", [
    (b"garbage", -32700, "Parse error: expected value"),
    (b'{"jsonrpc":"2.0","id":5,"method":"ping","params":{"a":"\\ud800"}}', -32700, "Parse error:"),
    (b"[" * 1000 + b"]" * 1000, -32700, "Parse error: recursion limit exceeded"),
    (b'{"jsonrpc":"2.0","id":6,"method":"tools/call","params":{"name":"soul_add","arguments":{"content":"caf\xe9"}}}',
     -32700, "Parse error: not UTF-8 (byte 101)"),
    (b'{"jsonrpc":"2.0","id":7,"bogus":true}', -32600, "Invalid Request"),
])
def test_every_line_the_server_cannot_parse_gets_a_json_rpc_error(tmp_path, line, code, words):
    proc = subprocess.Popen([sys.executable, "-m", "soulgraph.mcp", "--soul-file", str(tmp_path / "soul.json")],
                            stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    try:
        proc.stdin.write(json.dumps(INIT).encode() + b"\n")
        proc.stdin.write(b'{"jsonrpc":"2.0","method":"notifications/initialized"}\n' + line + b"\n")
        proc.stdin.write(b'{"jsonrpc":"2.0","id":8,"method":"ping"}\n')
        proc.stdin.flush()
        answers = []
        deadline = time.monotonic() + 30
        os.set_blocking(proc.stdout.fileno(), True)
        while len(answers) < 3 and time.monotonic() < deadline:
            raw = proc.stdout.readline()
            if not raw:
                break
            answers.append(json.loads(raw))
    finally:
        proc.kill()
        proc.wait(timeout=10)
    assert [a.get("id") for a in answers][0] == 0
    error = answers[1]["error"]
    assert error["code"] == code and error["message"].startswith(words), error
    expected_id = 7 if code == -32600 else None
    assert answers[1]["id"] == expected_id
    assert answers[2] == {"jsonrpc": "2.0", "id": 8, "result": {}}  # and the server goes on


def test_prime_shows_recent_work_and_the_match_not_only_pins(tmp_path):
    """A 14-entry persona used to fill prime(limit=10) with pins in reverse order and leave
    recent work out: now pins take a share, in their own order, and the snapshot keeps room
    for Recent."""
    persona = [f"Persona rule {i}: answer calmly and check the facts before saying anything about topic {i}."
               for i in range(1, 15)]

    async def scenario(session):
        for rule in persona:
            await session.call("soul_add", content=rule, pinned=True)
        for i in range(8):
            await session.call("soul_add", content=f"Worked on the billing migration, step {i}.", tags=["work"])
        primed = await session.call("soul_prime", context="billing migration", limit=10)
        pins = [n for n in primed["hot"] if n["pinned"]]
        assert [n["content"] for n in pins] == persona[:3]  # a share, in the persona's own order
        assert len(primed["hot"]) == 10 and sum(not n["pinned"] for n in primed["hot"]) == 7
        assert "billing migration" in primed["focus"]["content"]
        text = primed["snapshot"]
        identity, _, rest = text.partition("Recent:\n")
        assert rest.count("Worked on the billing migration") >= 4, text
        assert len(identity) <= 0.4 * 2200 and len(text) <= 2200

    with_server(tmp_path / "soul.json", scenario)


def test_the_advertised_resource_and_prompt_exist_and_answer(tmp_path):
    async def scenario(session):
        await session.call("soul_add", content="Release freeze starts on Friday.", kind="goal_or_commitment")
        resources = (await session.client.list_resources()).resources
        assert [str(r.uri) for r in resources] == ["soul://snapshot"]
        read = await session.client.read_resource("soul://snapshot")
        assert read.contents[0].text == "Commitments:\n- Release freeze starts on Friday.\n"
        prompts = (await session.client.list_prompts()).prompts
        assert [p.name for p in prompts] == ["soul_session_start"]
        got = await session.client.get_prompt("soul_session_start", {"task": "plan the release"})
        text = got.messages[0].content.text
        assert "Release freeze starts on Friday." in text and "The task: plan the release" in text

    with_server(tmp_path / "soul.json", scenario)


def test_through_hermes_each_result_reaches_the_model_once_and_refusals_in_one_line(hermes_exe, tmp_path):
    """A real `hermes chat` session against the model stub, the entry as our installer writes
    it: what Hermes sends the model back is the structured result once ({"result": …} inside
    Hermes' own untrusted-data envelope), and a refused argument is one readable line."""
    from soulgraph.hermes.install import install
    from tests import hermes_chat
    from tests.openai_stub import OpenAIStub, call, text_reply, tool_reply

    calls = [call("mcp__soul__soul_add", {"content": "Deploys happen on Tuesdays.", "tags": ["ops"]}, id="call_add"),
             call("mcp__soul__soul_add", {"content": "x", "parent": ["n1"]}, id="call_typo"),
             call("mcp__soul__soul_hot", {"limit": 500}, id="call_strict")]
    with OpenAIStub([tool_reply(*calls), text_reply("Done.")]) as stub:
        home = hermes_chat.make_stub_home(tmp_path / "home", stub.base_url)
        assert install(home, python=sys.executable)["status"] == "changed"
        run = hermes_chat.chat_once(home, "Remember when we deploy.", timeout=180)
        assert not run.timed_out, run
        sent = [m for seen in stub.chat_requests for m in seen.body.get("messages", []) if m.get("role") == "tool"]
    results = {m["tool_call_id"]: m["content"] for m in sent}
    assert set(results) == {"call_add", "call_typo", "call_strict"}, results

    def inner(content: str) -> dict:
        assert content.startswith("<untrusted_tool_result") and content.count("{") >= 1
        return json.loads(content[content.index("{"):content.rindex("}") + 1])

    added = inner(results["call_add"])
    assert set(added) == {"result"} and added["result"]["content"] == "Deploys happen on Tuesdays."
    assert results["call_add"].count("Deploys happen on Tuesdays.") == 1  # once, not two or three times
    typo = json.dumps(inner(results["call_typo"]))
    assert "soul_add: unknown argument 'parent'; soul_add takes content, tags, parents" in typo
    # (Hermes itself turns "5" into 5 for an integer argument, so a range is what reaches us)
    assert "soul_hot: limit: must be at most 100, got 500" in json.dumps(inner(results["call_strict"]))
