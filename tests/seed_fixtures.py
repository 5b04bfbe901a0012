"""A real-looking Hermes home for the seeding and installer tests.

Memory files are written the way hermes-agent 0.19 writes them: entries joined by
"\\n§\\n", no trailing newline. SOUL.md is hand-written markdown. A drift snapshot
(MEMORY.md.bak.<unix time>) repeats two entries, one with other whitespace, and keeps
one the live file lost; lock and temp files sit beside them as Hermes leaves them.
"""

from __future__ import annotations

from pathlib import Path

SOUL_MD = """\
# Identity

You are Hermes, a careful assistant for the platform team.
You answer in plain words.

## Values

- Never run destructive commands without asking first.
- Prefer small, reversible changes.
  - Take a backup before editing any config file.
- Say "I don't know" when you don't.

## Style

Short answers; code over prose.
"""

MEMORY_ENTRIES = [
    "Project atlas deploys with `make ship` from the main branch.",
    "The staging host stg-01 fills its disk every two weeks;\nclean /var/log/atlas first.",
    "## Tooling\n- atlas uses pnpm, not npm\n- run tests with pnpm test --run",
]

USER_ENTRIES = [
    "User is Dana, SRE lead; prefers terse answers.",
    "Dana works in UTC+1 and starts at 08:00.",
]

BACKUP_ENTRIES = [
    "Project atlas deploys with `make ship` from the main branch.",
    "The staging host   stg-01 fills its disk every two weeks;\n  clean /var/log/atlas first.",
    "Grafana lives at grafana.internal:3000 (an entry the live file lost).",
]


def snapshot(root: Path) -> dict[str, tuple[bytes | None, int, int]]:
    """Every file and folder under root: bytes, mode and mtime."""
    found = {}
    for path in sorted(root.rglob("*")):
        st = path.lstat()
        data = path.read_bytes() if path.is_file() and not path.is_symlink() else None
        found[str(path.relative_to(root))] = (data, st.st_mode, st.st_mtime_ns)
    return found


def write_home(home: Path) -> Path:
    (home / "memories").mkdir(parents=True, exist_ok=True)
    (home / "skills").mkdir(exist_ok=True)
    (home / "SOUL.md").write_text(SOUL_MD, encoding="utf-8")
    (home / "memories" / "MEMORY.md").write_text("\n§\n".join(MEMORY_ENTRIES), encoding="utf-8")
    (home / "memories" / "USER.md").write_text("\n§\n".join(USER_ENTRIES), encoding="utf-8")
    (home / "memories" / "MEMORY.md.bak.1714000000").write_text("\n§\n".join(BACKUP_ENTRIES), encoding="utf-8")
    (home / "memories" / "MEMORY.md.lock").write_text("")
    (home / "memories" / ".mem_abc123.tmp").write_text("half-written entry")
    return home


CONFIG_WITH_SERVERS = """\
# Hermes configuration, edited by hand.
_config_version: 33

model:
  default: anthropic/claude-sonnet   # the usual one
  provider: openrouter

mcp_servers:
    # Files under the project tree
    filesystem:
        command: npx
        args: ["-y", "@modelcontextprotocol/server-filesystem", "/srv/projects"]
        timeout: 120

    # GitHub, token from .env
    github:
        command: 'npx'
        args:
          - -y
          - "@modelcontextprotocol/server-github"
        env: {GITHUB_PERSONAL_ACCESS_TOKEN: "${GITHUB_TOKEN}"}

# Display settings
display:
  compact: true     # narrow terminals
"""
