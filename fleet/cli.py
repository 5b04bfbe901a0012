"""The operator's commands: fleet-update, fleet bootstrap, fleet status, fleet verify."""

from __future__ import annotations

import functools
import json
import sys
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import click

from fleet import inventory as inv
from fleet.build import REPO, BuildError, RuntimeBuilder, resolve_sha
from fleet.deploy import BOOTSTRAP_ROLES, UPDATE_ROLES, load_roles, update_host, with_soul
from fleet.roles import RoleError
from fleet.runner import Progress, exit_code, recap, run_hosts
from fleet.soul import SoulSourceError, SoulTree, describe, fetch, parse_soul

DEFAULT_INVENTORY = "inventory.yml"


def _select(inventory_path: str | None, target: str, limit: str | None,
            accept_new_host_keys: bool = False) -> list[inv.Host]:
    try:
        if inventory_path:
            inventory = inv.load(inventory_path)
        elif Path(DEFAULT_INVENTORY).exists() and target != inv.LOCAL:
            inventory = inv.load(DEFAULT_INVENTORY)
        else:
            inventory = inv.empty()
        hosts = inventory.select(target, limit)
    except inv.InventoryError as exc:
        raise click.ClickException(str(exc)) from None
    if accept_new_host_keys:
        # First contact only: a key already in known_hosts that has changed is still refused.
        for host in hosts:
            host.vars["accept_new_host_key"] = True
    return hosts


def _fail(message: str) -> None:
    click.echo(f"Error: {message}", err=True)
    sys.exit(1)


def _soul_known_hosts(hosts, given: str | None) -> str:
    """The known_hosts for an SSH soul remote: --soul-known-hosts, else the hosts' own (the
    fleet's), when they share one."""
    if given:
        return given
    files = {str(h.vars.get("known_hosts") or inv.DEFAULTS["known_hosts"]) for h in hosts}
    return files.pop() if len(files) == 1 else inv.DEFAULTS["known_hosts"]


def fetch_soul(value: str | None, hosts, *, known_hosts: str | None, key: str | None,
               accept_new: bool) -> SoulTree | None:
    """Clone, resolve and validate the soul on the operator, before any host is touched."""
    if not value:
        return None
    try:
        spec = parse_soul(value)
        return fetch(spec, known_hosts=_soul_known_hosts(hosts, known_hosts), key=key, accept_new=accept_new)
    except SoulSourceError as exc:
        _fail(f"--soul: {exc}")


def _run_update(hosts, ref, *, roles, hermes, yes, check, diff, forks, repo, title, soul=None,
                restart_gateway=False) -> int:
    try:
        sha = resolve_sha(ref, Path(repo))
    except BuildError as exc:
        _fail(str(exc))
    if soul is not None:
        roles = with_soul(roles)
    restart = "the Hermes gateway on every host (--restart-gateway)" if restart_gateway else \
        "the Hermes gateway, where the runtime or its entry changed or it runs another runtime" if hermes \
        else "nothing (the gateway picks up the new entry at its next restart; use --hermes)"
    click.echo(f"{title} {sha[:12]} ({ref}) on {len(hosts)} host(s): "
               f"{', '.join(h.name for h in hosts)}")
    click.echo(f"  roles: {' → '.join(roles)}; restarts: {restart}"
               + ("; CHECK MODE: nothing is changed" if check else ""))
    if soul is not None:
        click.echo(f"  soul: {describe(soul)}, valid; imported after the Hermes install")
    if not (yes or check) and not click.confirm("Go ahead?", default=False):
        click.echo("Nothing done.")
        return 1
    try:
        loaded = load_roles(roles)
    except RoleError as exc:
        _fail(str(exc))
    builder = RuntimeBuilder(sha, Path(repo))
    try:
        builder.runtime_wheel()  # fail fast, once, before any host is touched
    except BuildError as exc:
        _fail(f"cannot build the runtime at {sha[:12]}: {exc}")
    except KeyboardInterrupt:
        click.echo("Interrupted while building the runtime; no host was touched.", err=True)
        sys.exit(130)
    progress = Progress(show_diff=diff)
    work = lambda host, should_stop: update_host(
        host, sha=sha, builder=builder, roles=loaded, check=check, show_diff=diff,
        restart_gateway=hermes, on_report=progress.task, should_stop=should_stop, soul=soul,
        force_gateway_restart=restart_gateway)
    results, interrupted = run_hosts(hosts, work, forks=forks, progress=progress)
    click.echo("\n" + recap(results, soul=soul is not None))
    return exit_code(results, interrupted)


def _update_with_soul(hosts, ref, soul, soul_known_hosts, soul_key, accept_new, **update) -> int:
    """The run, with the --soul tree (if any) fetched and validated first and removed after."""
    tree = fetch_soul(soul, hosts, known_hosts=soul_known_hosts, key=soul_key, accept_new=accept_new)
    try:
        return _run_update(hosts, ref, soul=tree, **update)
    finally:
        if tree:
            tree.close()


def update_options(fn):
    @click.option("--hermes", is_flag=True, help="Restart the Hermes gateway where something changed "
                  "(or where it was last restarted onto another runtime).")
    @click.option("--restart-gateway", is_flag=True, help="Restart the Hermes gateway on every host, changed or not.")
    @click.option("--yes", "-y", is_flag=True, help="Do not ask before changing hosts.")
    @click.option("--check", is_flag=True, help="Change nothing; report what would change.")
    @click.option("--diff", is_flag=True, help="Show unified diffs of file changes.")
    @click.option("--limit", "-l", metavar="PATTERN", help="Only hosts or groups matching (fnmatch; commas).")
    @click.option("--forks", "-f", default=10, show_default=True, type=click.IntRange(1, 200),
                  help="Hosts worked on at once.")
    @click.option("-i", "--inventory", "inventory_path", metavar="INVENTORY",
                  help=f"YAML inventory (default: ./{DEFAULT_INVENTORY} if present).")
    @click.option("--accept-new-host-keys", is_flag=True,
                  help="Trust and record the key of a host not yet in known_hosts (never a changed key).")
    @click.option("--soul", "soul", metavar="REPO[@REF]",
                  help="Also import this layered soul repository (at REF: branch, tag or commit) on every host.")
    @click.option("--soul-known-hosts", metavar="FILE",
                  help="known_hosts for an SSH soul remote (default: the inventory's known_hosts).")
    @click.option("--soul-key", metavar="FILE", help="SSH key for the soul remote (default: ssh-agent, ~/.ssh).")
    @click.option("--repo", default=str(REPO), show_default=True, hidden=True,
                  help="The git repository the runtime is built from.")
    @functools.wraps(fn)
    def wrapper(*args, **kwargs):
        return fn(*args, **kwargs)
    return wrapper


@click.command(name="fleet-update")
@update_options
@click.argument("target")
@click.argument("sha", default="HEAD")
def fleet_update(hermes, restart_gateway, yes, check, diff, limit, forks, inventory_path, accept_new_host_keys,
                 soul, soul_known_hosts, soul_key, repo, target, sha):
    """Deploy the soul graph runtime at SHA (default HEAD) to TARGET and install it into Hermes.

    TARGET: all, a group, a host, a comma list, or `local` (this machine, no SSH).
    Exit: 0 all well, 2 a host failed, 4 a host unreachable, 6 both, 130 interrupted.
    """
    hosts = _select(inventory_path, target, limit, accept_new_host_keys)
    sys.exit(_update_with_soul(hosts, sha, soul, soul_known_hosts, soul_key, accept_new_host_keys,
                               roles=UPDATE_ROLES, hermes=hermes, yes=yes, check=check, diff=diff,
                               forks=forks, repo=repo, title="Update to", restart_gateway=restart_gateway))


@click.group()
def fleet():
    """soulfleet: roll the soul graph out to a fleet of Hermes hosts."""


fleet.add_command(fleet_update, name="update")


@fleet.command()
@update_options
@click.argument("hosts", nargs=-1, required=True)
@click.option("--sha", "ref", default="HEAD", show_default=True, help="The commit to deploy.")
def bootstrap(hermes, restart_gateway, yes, check, diff, limit, forks, inventory_path, accept_new_host_keys,
              soul, soul_known_hosts, soul_key, repo, hosts, ref):
    """Set up new HOSTS (folders, the gateway's systemd unit or launchd plist), then update them."""
    chosen = _select(inventory_path, ",".join(hosts), limit, accept_new_host_keys)
    sys.exit(_update_with_soul(chosen, ref, soul, soul_known_hosts, soul_key, accept_new_host_keys,
                               roles=BOOTSTRAP_ROLES, hermes=hermes, yes=yes, check=check, diff=diff,
                               forks=forks, repo=repo, title="Bootstrap at", restart_gateway=restart_gateway))


@fleet.command()
@click.argument("targets", nargs=-1)
@click.option("-i", "--inventory", "inventory_path", metavar="INVENTORY")
@click.option("--limit", "-l", metavar="PATTERN")
@click.option("--forks", "-f", default=10, type=click.IntRange(1, 200))
@click.option("--json", "as_json", is_flag=True, help="One JSON object per host.")
def status(targets, inventory_path, limit, forks, as_json):
    """Read-only: each host's deployed sha, Hermes soul entry, gateway state and soul commit.
    TARGETS: hosts or groups (several allowed; default all)."""
    from fleet.status import host_status
    hosts = _select(inventory_path, ",".join(targets) or "all", limit)
    with ThreadPoolExecutor(max_workers=forks) as pool:
        reports = list(pool.map(host_status, hosts))
    for r in reports:
        if as_json:
            click.echo(json.dumps(r))
        elif not r["reachable"]:
            click.echo(f"{r['host']}: UNREACHABLE — {r['error']}")
        else:
            click.echo(f"{r['host']}: {r['platform']} sha={(r['sha'] or '-')[:12]} "
                       f"hermes_entry={r['hermes_entry'] or '-'} gateway={r['gateway']} "
                       f"soul={(r['soul'] or '-')[:12]}")
    sys.exit(4 if any(not r["reachable"] for r in reports) else 0)


@fleet.command()
@click.argument("targets", nargs=-1)
@click.option("-i", "--inventory", "inventory_path", metavar="INVENTORY")
@click.option("--limit", "-l", metavar="PATTERN")
@click.option("--hermes", is_flag=True, help="Also check that the gateway is active.")
@click.option("--sha", "ref", help="Also check that `current` is the release of this commit.")
@click.option("--soul", metavar="REPO[@REF]", help="Also check that every host imported this layered soul commit.")
@click.option("--soul-known-hosts", metavar="FILE", help="known_hosts for an SSH soul remote.")
@click.option("--soul-key", metavar="FILE", help="SSH key for the soul remote.")
@click.option("--forks", "-f", default=10, show_default=True, type=click.IntRange(1, 200),
              help="Hosts checked at once.")
@click.option("--full", is_flag=True,
              help="Run the MCP self-check on every host, even where the one recorded by an earlier "
                   "verification still holds (runtime, interpreter and soul file unchanged).")
def verify(targets, inventory_path, limit, hermes, ref, soul, soul_known_hosts, soul_key, forks, full):
    """Check each host with pytest-testinfra (fleet.verify); TARGETS: hosts or groups (default
    all). Exit: 0 all passed, 2 a check failed, 4 a host unreachable or its key refused."""
    from fleet.verify import VerifyTarget, run_verify
    hosts = _select(inventory_path, ",".join(targets) or "all", limit)
    try:
        sha = resolve_sha(ref) if ref else None
    except BuildError as exc:
        _fail(str(exc))
    tree = fetch_soul(soul, hosts, known_hosts=soul_known_hosts, key=soul_key, accept_new=False)
    if tree:
        tree.close()
    sys.exit(run_verify([VerifyTarget.from_inventory(h) for h in hosts], hermes=hermes, sha=sha,
                        soul=tree.commit if tree else None, soul_origin=tree.spec.origin if tree else None,
                        forks=forks, full=full))
