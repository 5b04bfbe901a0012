"""Does one user's memory ever reach another? A leak count through every read path.

    .venv/bin/python bench/probe_scopes.py [--users 20] [--facts 5] [--tool-scopes 20]

A throwaway Hermes home with the plugin installed and one shared memory (the operator's).
Then, in Hermes' own venv, Hermes' `MemoryManager` with our provider loaded by Hermes' plugin
loader, as a gateway drives it:

1. each user (telegram, user ids 1001, 1002, ...) has one session in which they tell their
   facts (`sync_all`, plus one entry through Hermes' memory tool, `on_memory_write`) and
   which then ends (consolidation promotes their preferences); every user also says the same
   sentence, "I prefer green tea.", which must stay each user's own (nobody's confirms another's);
2. each user starts a new session and asks every question (the same questions for all users,
   so every user's facts match every question): the frozen system prompt block and each
   prefetch are kept;
3. the MCP server, started as Hermes starts it (default scope: shared only) and once per user
   with `--scope telegram:<id>` (the first `--tool-scopes` users), answers soul_query,
   soul_related, soul_prime, soul_hot, soul_by_tag and soul_summary for the same questions.

Each fact carries a word of its own user's (`zorvik1003c`): a leak is any such word of
another user in what a user got. It prints the leak count per read path (0 is the only
passing figure), how many of a user's own facts came back, and whether the shared memory
reached everyone. `probe()` is what tests/test_scopes_probe.py runs, smaller.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import re
import subprocess
import sys
import tempfile
import textwrap
import time
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from soulgraph.hermes import plugin_files  # noqa: E402
from soulgraph.memory.write import remember  # noqa: E402
from soulgraph.store import SoulFile  # noqa: E402
from tests import hermes_client, mcp_session  # noqa: E402

# Every fact names its user's own word, `{mark}`; the questions are everyone's.
FACTS = (
    "My locker combination at the gym is {mark} and I keep my passport in the blue drawer.",
    "My sister is called {mark} and she lives near the harbour.",
    "My doctor is Dr {mark} at the clinic on the hill.",
    "I park my bike in the {mark} garage every morning.",
    "My dog is named {mark} and he hates thunderstorms.",
    "The project I lead at work is code-named {mark}.",
)
QUESTIONS = (
    "Where is my passport and what is my locker combination?",
    "What is my sister called?",
    "Who is my doctor?",
    "Where do I park my bike?",
    "What is my dog's name?",
    "What project do I lead at work?",
)
MEMORY_TOOL_FACT = "Prefers meetings after {mark} o'clock"
COMMON = "I prefer green tea."
SHARED_FACT = "The office wifi network is called sharedsignal and the office closes at six."
SHARED_WORD = "sharedsignal"
TOOL_CALLS = ("soul_query", "soul_related", "soul_prime", "soul_hot", "soul_by_tag", "soul_summary")


def mark(user: int, fact: int) -> str:
    return f"zorvik{user}{'abcdefghij'[fact]}"


DRIVER = textwrap.dedent('''
    import json, sys
    from agent.memory_manager import MemoryManager
    from plugins.memory import load_memory_provider
    plan = json.loads(sys.stdin.read())
    home = plan["home"]

    def session(user, session_id):
        manager = MemoryManager()
        manager.add_provider(load_memory_provider("soulgraph"))
        manager.initialize_all(session_id=session_id, hermes_home=home, platform="telegram",
                               agent_context="primary", user_id=str(user))
        return manager

    for user in plan["users"]:  # 1: everyone tells their facts
        manager = session(user["id"], f"tell-{user['id']}")
        for fact in user["facts"]:
            manager.sync_all(fact, "Noted.", session_id=f"tell-{user['id']}")
        manager.on_memory_write("add", "user", user["memory_tool"])
        manager.flush_pending(timeout=30)
        manager.on_session_end([])
        manager.shutdown_all()
    out = {}
    for user in plan["users"]:  # 2: everyone asks
        manager = session(user["id"], f"ask-{user['id']}")
        got = {"block": manager.build_system_prompt(), "prefetch": []}
        for question in plan["questions"]:
            got["prefetch"].append(manager.prefetch_all(question, session_id=f"ask-{user['id']}"))
        manager.shutdown_all()
        out[str(user["id"])] = got
    print(json.dumps(out))
''')


def plan_users(users: int, facts: int) -> list[dict[str, Any]]:
    return [{"id": 1001 + u,
             "facts": [FACTS[f % len(FACTS)].format(mark=mark(1001 + u, f)) for f in range(facts)] + [COMMON],
             "memory_tool": MEMORY_TOOL_FACT.format(mark=mark(1001 + u, 9))} for u in range(users)]


def words_of(users: list[dict[str, Any]]) -> dict[int, set[str]]:
    return {u["id"]: {mark(u["id"], f) for f in range(len(u["facts"]) - 1)} | {mark(u["id"], 9)} for u in users}


_MARK = re.compile(r"zorvik\d+[a-j]")


def leaks(text: str, reader: int | None, owner_of: dict[str, int]) -> tuple[int, set[str]]:
    """(other users' words in `text`, the reader's own words found)."""
    found = _MARK.findall(text)
    other = sum(1 for word in found if owner_of.get(word) != reader)
    return other, {word for word in found if owner_of.get(word) == reader}


def tool_answers(soul_file: Path, scope: str | None, questions: tuple[str, ...]) -> str:
    """Every read tool's answers for the questions, as one text, from a server started with `scope`."""
    extra = ["--no-embed"] + (["--scope", scope] if scope else [])
    texts: list[str] = []

    async def ask(session: mcp_session.Session) -> None:
        for question in questions:
            for name, args in (("soul_query", {"query": question, "limit": 20}),
                               ("soul_related", {"query": question, "limit": 20}),
                               ("soul_prime", {"context": question, "limit": 20})):
                texts.append(json.dumps(await session.call(name, **args)))
        texts.append(json.dumps(await session.call("soul_hot", limit=100)))
        for tag in ("user", "preference", "turn"):
            texts.append(json.dumps(await session.call("soul_by_tag", tag=tag, limit=100)))
        texts.append(json.dumps(await session.call("soul_summary", limit=50)))

    async def bounded(session: mcp_session.Session) -> None:
        await asyncio.wait_for(ask(session), 300)

    mcp_session.with_server(soul_file, bounded, extra_args=extra)
    return "\n".join(texts)


def probe(users: int = 20, facts: int = 5, tool_scopes: int = 20, *, folder: Path | None = None) -> dict[str, Any]:
    """Run the probe; the report's `leaks` maps each read path to its count."""
    python = hermes_client.ensure_hermes_venv().parent / "python"
    plan = plan_users(users, facts)
    owner_of = {word: user for user, words in words_of(plan).items() for word in words}
    with tempfile.TemporaryDirectory(prefix="probe-scopes-", dir=folder) as temp:
        home = hermes_client.make_hermes_home(Path(temp) / "home")
        soul_file = home / "soul.json"
        soul = SoulFile(soul_file)
        with soul.change() as graph:  # the operator's memory: shared by every user
            remember(graph, SHARED_FACT, ["office"], writer="operator", kind="semantic_fact")
        plugin_files.write(plugin_files.plan(home, sys.executable, soul_file))
        config = home / "config.yaml"
        config.write_text(config.read_text() + "\nmemory:\n  provider: soulgraph\n")
        started = time.monotonic()
        proc = subprocess.run([str(python), "-c", DRIVER], input=json.dumps({"home": str(home), "users": plan,
                                                                              "questions": QUESTIONS[:max(facts, 1)]}),
                              capture_output=True, text=True, timeout=900, env=hermes_client.hermes_env(home))
        if proc.returncode != 0:
            raise RuntimeError(f"the Hermes driver failed:\n{proc.stderr[-3000:]}")
        got = json.loads(proc.stdout.strip().splitlines()[-1])
        provider_seconds = time.monotonic() - started
        graph = SoulFile(soul_file).graph()
        report: dict[str, Any] = {"users": users, "facts_per_user": facts, "memories": len(graph.nodes),
                                  "user_scopes": len(graph.scopes), "provider_seconds": round(provider_seconds, 1),
                                  "leaks": {"system prompt block": 0, "prefetch": 0, "tools (shared server)": 0,
                                            "tools (a user's server)": 0},
                                  "own_words_back": 0, "own_words": 0, "shared_reached": 0}
        for user in plan:
            reader, answers = user["id"], got[str(user["id"])]
            block_leaks, own_block = leaks(answers["block"], reader, owner_of)
            report["leaks"]["system prompt block"] += block_leaks
            prefetch = "\n".join(answers["prefetch"])
            prefetch_leaks, own = leaks(prefetch, reader, owner_of)
            report["leaks"]["prefetch"] += prefetch_leaks
            report["own_words"] += len(user["facts"]) - 1
            report["own_words_back"] += len({w for w in own | own_block if not w.endswith("j")})
            report["shared_reached"] += SHARED_WORD in prefetch or SHARED_WORD in answers["block"]
        # Each user said "I prefer green tea." once: a memory of it confirmed is one user confirming another's.
        common = [n for n in graph.nodes.values() if n.content == COMMON]
        report["green_tea_memories"] = len(common)
        report["cross_user_confirmations"] = sum(1 for n in common if n.strength > 1.0 or n.scope == "")
        shared_text = tool_answers(soul_file, None, QUESTIONS[:max(facts, 1)])
        report["leaks"]["tools (shared server)"] = leaks(shared_text, None, owner_of)[0]
        for user in plan[:tool_scopes]:
            text = tool_answers(soul_file, f"telegram:{user['id']}", QUESTIONS[:max(facts, 1)])
            report["leaks"]["tools (a user's server)"] += leaks(text, user["id"], owner_of)[0]
        report["tool_servers"] = 1 + min(tool_scopes, users)
    report["total_leaks"] = sum(report["leaks"].values()) + report["cross_user_confirmations"]
    return report


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--users", type=int, default=20)
    parser.add_argument("--facts", type=int, default=5, help=f"private facts per user (at most {len(FACTS)})")
    parser.add_argument("--tool-scopes", type=int, default=20, help="users whose own MCP server is asked too")
    args = parser.parse_args()
    report = probe(args.users, min(args.facts, len(FACTS)), args.tool_scopes)
    print(f"{report['users']} users x {report['facts_per_user']} private facts (+1 memory-tool entry, +1 common "
          f"sentence each), {report['memories']:,} memories in {report['user_scopes']} user scopes")
    print(f"{'read path':<26} | leaks")
    print("-" * 36)
    for path, count in report["leaks"].items():
        print(f"{path:<26} | {count}")
    print(f"{'cross-user confirmations':<26} | {report['cross_user_confirmations']}")
    print(f"total leaks: {report['total_leaks']} (0 is the only passing figure)")
    print(f"own facts recalled: {report['own_words_back']} of {report['own_words']}; "
          f"the shared memory reached {report['shared_reached']} of {report['users']} users; "
          f"{report['tool_servers']} MCP servers asked")
    return 0 if report["total_leaks"] == 0 else 1


if __name__ == "__main__":
    sys.exit(main())
