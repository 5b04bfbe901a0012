"""Which Hermes home a host's agent runs from, and what its gateway service is called there.

Facts read off hermes-agent 0.19 (`hermes_cli/gateway.py`, docs/hermes-facts.md):
- a root holding an `active_profile` file (a profile name; empty or `default` means the root)
  runs from `<root>/profiles/<name>`, as the installer follows too;
- the gateway of `~/.hermes` is `hermes-gateway.service` (systemd --user) / `ai.hermes.gateway`
  (launchd); of a profile `~/.hermes/profiles/<name>`, `hermes-gateway-<name>.service` /
  `ai.hermes.gateway-<name>`; of any other home, the suffix is the first 8 hex digits of the
  SHA-256 of its path.
"""

from __future__ import annotations

import hashlib
import posixpath
from dataclasses import dataclass

from soulgraph.hermes.home import PROFILE_NAME  # the installer's own rule for profile names


@dataclass(frozen=True)
class HermesNames:
    home: str  # the home the agent runs from (a profile home when active_profile says so)
    profile: str | None
    unit: str  # systemd --user unit
    label: str  # launchd label


def profile_command(hermes_home_sh: str) -> str:
    """Shell that prints the active_profile file's first line (nothing when there is none)."""
    return f"head -n 1 {hermes_home_sh}/active_profile 2>/dev/null || true"


def resolve(hermes_home: str, user_home: str, active_profile: str | None) -> HermesNames:
    """`hermes_home` and `user_home` absolute (already expanded on the host)."""
    home = hermes_home.rstrip("/") or "/"
    profile = (active_profile or "").strip().lower()
    if posixpath.basename(posixpath.dirname(home)) == "profiles":
        profile = posixpath.basename(home)  # already a profile home
    elif profile and profile != "default" and PROFILE_NAME.match(profile):
        home = posixpath.join(home, "profiles", profile)
    else:
        profile = ""
    default_root = posixpath.join(user_home.rstrip("/"), ".hermes")
    if home == default_root:
        suffix = ""
    elif posixpath.dirname(home) == posixpath.join(default_root, "profiles") and PROFILE_NAME.match(posixpath.basename(home)):
        suffix = posixpath.basename(home)
    else:
        suffix = hashlib.sha256(home.encode()).hexdigest()[:8]
    return HermesNames(home, profile or None, f"hermes-gateway{'-' + suffix if suffix else ''}.service",
                       f"ai.hermes.gateway{'-' + suffix if suffix else ''}")

