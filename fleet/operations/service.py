"""service: restart a per-user service — systemd --user on Linux, launchd on macOS.

macOS: `launchctl kickstart -k gui/<uid>/<label>` restarts an agent in the user's GUI session.
Over SSH with nobody logged in at the screen there is no gui/ domain, so `user/<uid>/<label>` is
tried next. Linux: `systemctl --user` needs the user's bus, found through XDG_RUNTIME_DIR, which a
non-interactive SSH session may not set. A host var can replace the whole restart command (hosts
with s6, a container, or no gateway at all). `record` and `runtime`: after a restart that
worked, `runtime` (the sha) is written to the file `record`, so a later run knows which runtime
the service was last started on.
"""

from __future__ import annotations

import shlex

from fleet.operations.base import CHANGED, Context, Outcome, failed_result, operation


# Over SSH XDG_RUNTIME_DIR may be unset; systemctl --user needs it to find the user's bus.
XDG_RUNTIME = 'XDG_RUNTIME_DIR="${XDG_RUNTIME_DIR:-/run/user/$(id -u)}" '


def restart_argvs(platform: str, uid: int | str, unit: str, label: str) -> list[list[str]]:
    """The restart commands to try in order; the first that exits 0 wins."""
    if platform == "macos":
        return [["launchctl", "kickstart", "-k", f"gui/{uid}/{label}"],
                ["launchctl", "kickstart", "-k", f"user/{uid}/{label}"]]
    return [["systemctl", "--user", "restart", unit]]


def status_argv(platform: str, uid: int | str, unit: str, label: str) -> list[str]:
    if platform == "macos":
        return ["launchctl", "print", f"gui/{uid}/{label}"]
    return ["systemctl", "--user", "is-active", unit]


def restart_command(platform: str, uid: int | str, unit: str, label: str,
                    override: str | None = None) -> str:
    if override:
        return override
    if platform == "macos":  # say which launchd domain took it
        return " || ".join(f"{{ {shlex.join(argv)} && echo {shlex.quote(argv[-1].rsplit('/', 1)[0])}; }}"
                           for argv in restart_argvs(platform, uid, unit, label))
    tries = " || ".join(shlex.join(argv) for argv in restart_argvs(platform, uid, unit, label))
    if platform == "macos":
        return tries
    return XDG_RUNTIME + tries


def status_command(hvars: dict, platform: str, uid: int | str, unit: str, label: str) -> str | None:
    """The shell command that exits 0 when the gateway runs: the inventory's
    gateway_status_command, else systemd/launchd's, unless the host restarts its gateway its own
    way (gateway_restart_command without a status command: None, we cannot tell)."""
    if hvars.get("gateway_status_command"):
        return str(hvars["gateway_status_command"])
    if hvars.get("gateway_restart_command"):
        return None
    argv = status_argv(platform, uid, unit, label)
    return shlex.join(argv) if platform == "macos" else XDG_RUNTIME + shlex.join(argv)


@operation("service")
def service(ctx: Context, unit: str, label: str, state: str = "restarted",
            restart_command_override: str | None = None, record: str | None = None,
            runtime: str | None = None) -> Outcome:
    if state != "restarted":
        raise ValueError("service supports state: restarted")
    platform, uid = ctx.facts.get("platform", "linux"), ctx.facts.get("uid")
    cmd = restart_command(platform, uid, unit, label, restart_command_override)
    if ctx.check:
        return Outcome(CHANGED, f"would restart: {cmd}")
    result = ctx.run(cmd, timeout=120)
    if not result.ok:
        return failed_result(result, f"restart ({cmd})")
    if record and runtime:
        ctx.conn.put(f"{runtime}\n".encode(), record)  # the connection's atomic write
    domain = result.stdout.strip().splitlines()[-1] if platform == "macos" and not restart_command_override \
        and result.stdout.strip() else ""
    return Outcome(CHANGED, f"restarted in launchd's {domain} domain" if domain else f"restarted: {cmd}")
