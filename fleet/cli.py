"""The operator's commands: fleet-update, fleet bootstrap, fleet status, fleet verify, fleet backup,
fleet restore, fleet memories, fleet soul collect."""

from __future__ import annotations

import contextlib
import functools
import json
import os
import sys
import threading
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import click

from fleet import inventory as inv
from fleet import memory, run_lock
from fleet.build import REPO, BuildError, RuntimeBuilder, resolve_sha
from fleet.deploy import BOOTSTRAP_ROLES, UPDATE_ROLES, load_roles, update_host, with_soul
from fleet.roles import RoleError
from fleet.connections import CommandTimeout, HostConnectionError
from fleet.runner import EXIT_INTERRUPTED, EXIT_UNREACHABLE, Progress, exit_code, recap, run_hosts
from fleet.soul import SoulSourceError, SoulTree, describe, fetch, parse_soul
from fleet import soul_collect

DEFAULT_INVENTORY = "inventory.yml"
NO_INVENTORY = ("no inventory: no -i INVENTORY was given and there is no ./{default} here, so {target!r} "
                "names no hosts. Copy inventory.example to {default} and list your hosts in it (or give "
                "-i PATH); to work on this machine alone, give the target 'local' (./run-local does)")


def _inventory_file(inventory_path: str | None, target: str) -> str | None:
    """The inventory a run reads (None: no file, only `local`), as _select picks it."""
    if inventory_path:
        return inventory_path
    if Path(DEFAULT_INVENTORY).exists() and target != inv.LOCAL:
        return DEFAULT_INVENTORY
    return None


def _select(inventory_path: str | None, target: str, limit: str | None,
            accept_new_host_keys: bool = False) -> list[inv.Host]:
    try:
        path = _inventory_file(inventory_path, target)
        inventory = inv.load(path) if path else inv.empty()
        if path is None and any(p.strip() not in ("", inv.LOCAL) for p in target.split(",")):
            raise inv.InventoryError(NO_INVENTORY.format(default=DEFAULT_INVENTORY, target=target))
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


def _take_run_lock(inventory_path: str | None, target: str, wait: float, check: bool):
    """The fleet-wide run lock of the inventory this run reads (none for --check); exits 75
    naming the holder when another run has it."""
    if check:
        return contextlib.nullcontext()
    try:
        return run_lock.take(_inventory_file(inventory_path, target), _run_description(), wait=wait)
    except run_lock.RunLocked as exc:
        click.echo(f"Error: {exc}", err=True)
        sys.exit(run_lock.EXIT_LOCKED)


def _run_description() -> str:
    """What this run is, for the lock file: the command and what it works on ("fleet-update all
    1a2b3c4d5e6f", "fleet restore h03"), read from click's context (sys.argv is not the command's
    own when it is invoked from Python)."""
    ctx = click.get_current_context()
    words = [ctx.command_path]
    for name in ("hosts", "targets", "host", "target", "sha"):
        value = ctx.params.get(name)
        if value:
            words.append(",".join(value) if isinstance(value, tuple) else str(value))
    return " ".join(words)


def _confirm(yes: bool, check: bool, doing: str) -> bool:
    """Go ahead? --yes and --check never ask; with no terminal to ask on, refuse."""
    if yes or check:
        return True
    if not sys.stdin.isatty():
        _fail(f"refusing to {doing} without --yes (there is no terminal to ask on); give --yes, "
              "or --check to see what it would do")
    if click.confirm("Go ahead?", default=False):
        return True
    click.echo("Nothing done.")
    return False


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


def wait_option(fn):
    return click.option("--wait", "wait", default=0.0, type=click.FloatRange(0, 24 * 3600), metavar="SECONDS",
                        help="When another run holds this inventory's run lock, wait up to this long for it "
                             "(default: exit at once, 75).")(fn)


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
    @wait_option
    @functools.wraps(fn)
    def wrapper(*args, **kwargs):
        return fn(*args, **kwargs)
    return wrapper


@click.command(name="fleet-update")
@update_options
@click.argument("target")
@click.argument("sha", default="HEAD")
def fleet_update(hermes, restart_gateway, yes, check, diff, limit, forks, inventory_path, accept_new_host_keys,
                 soul, soul_known_hosts, soul_key, repo, wait, target, sha):
    """Deploy the soul graph runtime at SHA (default HEAD) to TARGET and install it into Hermes.

    TARGET: all, a group, a host, a comma list, or `local` (this machine, no SSH).
    Exit: 0 all well, 2 a host failed, 4 a host unreachable, 6 both, 75 another run holds the
    inventory's run lock, 130 interrupted.
    """
    hosts = _select(inventory_path, target, limit, accept_new_host_keys)
    with _take_run_lock(inventory_path, target, wait, check):
        code = _update_with_soul(hosts, sha, soul, soul_known_hosts, soul_key, accept_new_host_keys,
                                 roles=UPDATE_ROLES, hermes=hermes, yes=yes, check=check, diff=diff,
                                 forks=forks, repo=repo, title="Update to", restart_gateway=restart_gateway)
    sys.exit(code)


@click.group()
def fleet():
    """soulfleet: roll the soul graph out to a fleet of Hermes hosts."""


fleet.add_command(fleet_update, name="update")


@fleet.command()
@update_options
@click.argument("hosts", nargs=-1, required=True)
@click.option("--sha", "ref", default="HEAD", show_default=True, help="The commit to deploy.")
@click.option("--memory-from", "memory_from", metavar="OLD|BACKUP",
              help="After the bootstrap, give the new host this soul: an inventory host's (a fresh backup of it "
                   "is taken first; it is left as it was), or a backup folder or file of `fleet backup`.")
@click.option("--dest", type=click.Path(file_okay=False), metavar="DIR",
              help="Where the fresh backup of OLD goes (default: the operator's backup folder).")
def bootstrap(hermes, restart_gateway, yes, check, diff, limit, forks, inventory_path, accept_new_host_keys,
              soul, soul_known_hosts, soul_key, repo, wait, hosts, ref, memory_from, dest):
    """Set up new HOSTS (folders, the gateway's systemd unit or launchd plist), then update them.

    With --memory-from, moving an agent: the new host then gets the old host's soul (or a backup's).
    Exit: as fleet-update's (0, 2, 4, 6, 75, 130).
    """
    target = ",".join(hosts)
    chosen = _select(inventory_path, target, limit, accept_new_host_keys)
    update = dict(roles=BOOTSTRAP_ROLES, hermes=hermes, diff=diff, forks=forks, repo=repo,
                  title="Bootstrap at", restart_gateway=restart_gateway)
    with _take_run_lock(inventory_path, target, wait, check):
        if not memory_from:
            code = _update_with_soul(chosen, ref, soul, soul_known_hosts, soul_key, accept_new_host_keys,
                                     yes=yes, check=check, **update)
        else:
            code = _bootstrap_with_memory(chosen, memory_from, Path(dest) if dest else memory.default_dest(),
                                          inventory_path, yes=yes, check=check, hermes=hermes,
                                          accept_new=accept_new_host_keys,
                                          bootstrap=lambda: _update_with_soul(
                                              chosen, ref, soul, soul_known_hosts, soul_key, accept_new_host_keys,
                                              yes=True, check=check, **update))
    sys.exit(code)


def _memory_source(value: str, inventory_path: str | None, accept_new: bool, new: inv.Host):
    """(the OLD host, None) when `value` names an inventory host, else (None, a checked backup)."""
    path = _inventory_file(inventory_path, value)
    if path and not Path(value).exists():
        try:
            named = inv.load(path).select(value)
        except inv.InventoryError:
            named = []
        if len(named) == 1 and not named[0].local:
            if named[0].name == new.name:
                _fail(f"--memory-from {value}: that is the new host itself")
            if accept_new:
                named[0].vars["accept_new_host_key"] = True
            return named[0], None
    try:
        backup_file = memory.resolve_backup(value, memory.default_dest(), None)
        memory.check_local_backup(backup_file)
    except memory.BackupInputError as exc:
        where = f" in {path}" if path else ""
        _fail(f"--memory-from {value}: not a host{where}, nor a backup: {exc}; nothing was done")
    return None, backup_file


def _bootstrap_with_memory(chosen, memory_from, dest, inventory_path, *, yes, check, hermes, accept_new,
                           bootstrap) -> int:
    if len(chosen) != 1:
        _fail(f"--memory-from moves one agent: name one new host, not {len(chosen)} ({', '.join(h.name for h in chosen)})")
    new = chosen[0]
    old, backup_file = _memory_source(memory_from, inventory_path, accept_new, new)
    source = f"a fresh backup of {old.name} (left as it is), into {dest}" if old else str(backup_file)
    click.echo(f"Moving an agent to {new.name}: bootstrap it, then give it the soul of {source}"
               + ("; CHECK MODE: nothing is changed" if check else ""))
    if not _confirm(yes, check, f"bootstrap {new.name}"):
        return 1
    if old:
        taken = memory.backup_host(old, dest=dest, keep=memory.DEFAULT_KEEP, check=check, on_line=click.echo)
        if taken.status not in ("ok", "changed"):
            click.echo(f"{old.name}: {taken.status.upper()} — {taken.message}")
            click.echo(f"The backup of {old.name} was not made, so {new.name} was not touched.")
            return exit_code([taken])
        backup_file = Path(taken.facts["backup"]) if not check else None
    code = bootstrap()
    if code != 0:
        click.echo(f"\nThe bootstrap of {new.name} did not succeed (exit {code}), so its soul was not replaced"
                   + (f"; the backup of {old.name} is at {backup_file}" if old and backup_file else "") + ".")
        return code
    click.echo("")
    if check and backup_file is None:
        click.echo(f"{new.name}: would restore the fresh backup of {old.name} onto its soul, keeping the soul "
                   f"there beside it first" + ("; would restart the gateway" if hermes else ""))
        return 0
    result = memory.restore_host(new, backup_file, check=check, hermes=hermes,
                                 title="bootstrap --memory-from", on_line=click.echo)
    if result.status in ("failed", "unreachable"):
        click.echo(f"{new.name}: {result.status.upper()} — {result.message}")
    click.echo("\n" + recap([result]))
    return exit_code([result])


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
              help="Run the MCP self-check (and with --hermes, Hermes' own client checks) on every host, "
                   "even where the answers recorded by an earlier verification still hold (nothing they "
                   "depend on changed).")
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


def memory_options(fn):
    for option in reversed([
        click.option("-i", "--inventory", "inventory_path", metavar="INVENTORY",
                     help=f"YAML inventory (default: ./{DEFAULT_INVENTORY} if present)."),
        click.option("--dest", type=click.Path(file_okay=False), metavar="DIR",
                     help="The operator's backup folder (default: $XDG_DATA_HOME/soulfleet/backups, "
                          "else ~/.local/share/soulfleet/backups)."),
        click.option("--check", is_flag=True, help="Change nothing; say what would be done."),
        click.option("--yes", "-y", is_flag=True, help="Do not ask first (for cron)."),
        click.option("--accept-new-host-keys", is_flag=True,
                     help="Trust and record the key of a host not yet in known_hosts (never a changed key)."),
        wait_option,
    ]):
        fn = option(fn)
    return fn


@fleet.command(name="backup")
@click.argument("targets", nargs=-1)
@memory_options
@click.option("--keep", default=memory.DEFAULT_KEEP, show_default=True, type=click.IntRange(1, 100000),
              help="Backups kept per host: older ones are removed after a new one is checked.")
@click.option("--limit", "-l", metavar="PATTERN", help="Only hosts or groups matching (fnmatch; commas).")
@click.option("--forks", "-f", default=10, show_default=True, type=click.IntRange(1, 200),
              help="Hosts backed up at once.")
def backup_command(targets, inventory_path, dest, check, yes, accept_new_host_keys, wait, keep, limit, forks):
    """Copy each host's soul to the operator: DEST/<host>/<UTC time>/soul.json, by the runtime's
    own online backup on the host (servers keep writing), checked after the copy.

    TARGETS: hosts or groups (several allowed; default all).
    Exit: 0 all backed up, 2 a host failed, 4 a host unreachable, 6 both, 75 another run holds
    the inventory's run lock, 130 interrupted.
    """
    target = ",".join(targets) or "all"
    hosts = _select(inventory_path, target, limit, accept_new_host_keys)
    folder = Path(dest).expanduser() if dest else memory.default_dest()
    click.echo(f"Back up the soul of {len(hosts)} host(s) into {folder}/<host>/, keeping {keep} each: "
               f"{', '.join(h.name for h in hosts)}" + ("; CHECK MODE: nothing is copied" if check else ""))
    if not _confirm(yes, check, "back up"):
        sys.exit(1)
    with _take_run_lock(inventory_path, target, wait, check):
        progress = Progress()
        work = lambda host, should_stop: memory.backup_host(host, dest=folder, keep=keep, check=check,
                                                            on_line=progress.line, should_stop=should_stop)
        results, interrupted = run_hosts(hosts, work, forks=forks, progress=progress)
    click.echo("\n" + recap(results))
    sys.exit(exit_code(results, interrupted))


MEMORIES_ASK = {"forget": "--hard", "forget-user": None}  # commands that ask first (with this flag, if one)


@fleet.command(name="memories", context_settings={"ignore_unknown_options": True, "allow_interspersed_args": False})
@click.argument("host")
@click.argument("args", nargs=-1, type=click.UNPROCESSED, metavar="COMMAND [ARGS]... | --web [--allow-edits]")
@click.option("-i", "--inventory", "inventory_path", metavar="INVENTORY",
              help=f"YAML inventory (default: ./{DEFAULT_INVENTORY} if present).")
@click.option("--accept-new-host-keys", is_flag=True,
              help="Trust and record the key of a host not yet in known_hosts (never a changed key).")
@click.option("--timeout", default=memory.MEMORIES_SECONDS, show_default=True, type=click.FloatRange(1, 3600),
              help="Seconds the command may take on the host (with --web: its server's start).")
@click.option("--web", is_flag=True,
              help="The memories web page of HOST, through an SSH tunnel to its loopback, until Ctrl-C.")
@click.option("--allow-edits", is_flag=True, help="With --web: allow edit, pin, archive and forget from the page.")
def memories_command(host, args, inventory_path, accept_new_host_keys, timeout, web, allow_edits):
    """See and correct what HOST's agent remembers: `python -m soulgraph.memories COMMAND ARGS`
    run on the host, on its agent's soul (list, search, show, history, edit --content, pin,
    unpin, archive, unarchive, forget, users, share, forget-user, flagged, release, consolidate;
    --json). A command that asks first asks here. With --web (after HOST or before it), the
    host's memories page: its server on the host's 127.0.0.1, reached from a local 127.0.0.1
    port through the same SSH connection, until Ctrl-C. Exit: the command's own (0 done, 1
    refused, 2 bad usage), 4 the host is unreachable."""
    args = list(args)
    if args and args[0] == "--web":  # after HOST: click leaves everything there to COMMAND
        web, rest = True, args[1:]
        allow_edits = allow_edits or "--allow-edits" in rest
        unknown = [a for a in rest if a != "--allow-edits"]
        if unknown:
            raise click.UsageError(f"--web takes only --allow-edits, not {' '.join(unknown)}")
        args = []
    if web and args:
        raise click.UsageError("--web runs the page, not a COMMAND: give one or the other")
    if not web and not args:
        raise click.UsageError("Missing argument 'COMMAND [ARGS]...' (or --web).")
    if allow_edits and not web:
        raise click.UsageError("--allow-edits is for --web")
    chosen = _select(inventory_path, host, None, accept_new_host_keys)
    if len(chosen) != 1:
        _fail(f"{host!r} names {len(chosen)} hosts ({', '.join(h.name for h in chosen)}); one host at a time")
    if web:
        # --timeout given: the server's start may take that long; else WEB_START_SECONDS.
        start = memory.WEB_START_SECONDS if timeout == memory.MEMORIES_SECONDS else timeout
        _memories_web(chosen[0], allow_edits=allow_edits, start_timeout=start)
        return
    if any(a in ("--soul-file", "--hermes-home") or a.startswith(("--soul-file=", "--hermes-home=")) for a in args):
        _fail("the host's own agent soul is used; --soul-file and --hermes-home are not for fleet memories")
    command = args[0]
    if command == "edit" and not any(a == "--content" or a.startswith("--content=") or a in ("--kind", "--tags")
                                     for a in args):
        _fail("edit over the fleet needs --content TEXT (or --kind / --tags): no editor runs on the host")
    if command in MEMORIES_ASK and (MEMORIES_ASK[command] is None or MEMORIES_ASK[command] in args) \
            and "--yes" not in args:
        what = " ".join(args[:2])
        if not _confirm(False, False, f"run `{what}` on {chosen[0].name}"):
            sys.exit(1)
        args.append("--yes")
    try:
        done = memory.memories_on_host(chosen[0], args, timeout=timeout)
    except memory.BackupInputError as exc:
        _fail(str(exc))
    except HostConnectionError as exc:
        click.echo(f"Error: {exc}", err=True)
        sys.exit(EXIT_UNREACHABLE)
    except CommandTimeout as exc:
        _fail(f"{exc}; a change it was making is made whole or not at all (the store is journaled)")
    except KeyboardInterrupt:
        click.echo("Interrupted.", err=True)
        sys.exit(EXIT_INTERRUPTED)
    click.echo(done.stdout, nl=False)
    click.echo(done.stderr, nl=False, err=True)
    sys.exit(done.rc)


def _memories_web(host, *, allow_edits: bool, start_timeout: float) -> None:
    """`fleet memories HOST --web`: serve until Ctrl-C (a second one exits at once), then stop
    the host's server. Exit 0 stopped by Ctrl-C, 1 the server did not start or stopped, 4 the
    host is unreachable or its connection was lost."""
    import signal
    import time

    try:
        session = memory.web_on_host(host, allow_edits=allow_edits, start_timeout=start_timeout)
    except (memory.BackupInputError, memory.WebFailed) as exc:
        _fail(str(exc))
    except HostConnectionError as exc:
        click.echo(f"Error: {exc}", err=True)
        sys.exit(EXIT_UNREACHABLE)
    except KeyboardInterrupt:
        click.echo("Interrupted.", err=True)
        sys.exit(EXIT_INTERRUPTED)
    said = next((line for line in session.said if line.startswith("serving ")), "serving")
    said = said.removesuffix(" at").removesuffix(":")
    click.echo(f"{host.name}: {said}, through an SSH tunnel (the host listens on its 127.0.0.1 only), at\n"
               f"    {session.url}\nCtrl-C stops it.")
    code, problem = 0, None
    try:
        while problem is None:
            time.sleep(memory.WEB_POLL_SECONDS)
            problem = session.problem()
        code = 1
    except HostConnectionError as exc:
        problem, code = f"{exc}; the host's memories server ends with the connection", EXIT_UNREACHABLE
    except KeyboardInterrupt:
        pass
    # A second Ctrl-C leaves at once: the host still ends its server when the connection closes.
    signal.signal(signal.SIGINT, lambda *_: os._exit(EXIT_INTERRUPTED))
    if problem:
        click.echo(f"Error: {problem}", err=True)
    else:
        click.echo(f"Stopping the memories server on {host.name} ...", err=True)
    session.close()
    if not problem:
        click.echo("Stopped.", err=True)
    sys.exit(code)


@fleet.command(name="restore")
@click.argument("host")
@click.option("--from", "source", required=True, metavar="BACKUP",
              help="A backup folder of `fleet backup`, its soul.json, a host's folder of backups (its newest), "
                   "or 'latest' (HOST's newest under --dest).")
@memory_options
@click.option("--hermes", is_flag=True, help="Restart the Hermes gateway onto the restored soul.")
def restore_command(host, source, inventory_path, dest, check, yes, accept_new_host_keys, wait, hermes):
    """Put a backup in place of HOST's soul; the soul there is kept beside it first (the
    runtime's `store restore`). Exit: 0 restored, 2 failed, 4 unreachable, 75 run lock held,
    1 bad input (nothing changed)."""
    chosen = _select(inventory_path, host, None, accept_new_host_keys)
    if len(chosen) != 1:
        _fail(f"{host!r} names {len(chosen)} hosts ({', '.join(h.name for h in chosen)}); restore one host at a time")
    target_host = chosen[0]
    folder = Path(dest).expanduser() if dest else memory.default_dest()
    try:
        backup_file = memory.resolve_backup(source, folder, target_host.name)
        checked = memory.check_local_backup(backup_file)
    except memory.BackupInputError as exc:
        _fail(f"--from {source}: {exc}; nothing was changed")
    click.echo(f"Restore {target_host.name} from {backup_file}: {checked['nodes']} memories, {checked['edges']} links, "
               f"seq {checked['seq']}; the soul there is kept beside it first"
               + ("; then the gateway is restarted" if hermes else "")
               + ("; CHECK MODE: nothing is changed" if check else ""))
    if not _confirm(yes, check, f"restore {target_host.name}"):
        sys.exit(1)
    with _take_run_lock(inventory_path, host, wait, check):
        try:
            result = memory.restore_host(target_host, backup_file, check=check, hermes=hermes, on_line=click.echo)
        except KeyboardInterrupt:
            click.echo("Interrupted.", err=True)
            sys.exit(EXIT_INTERRUPTED)
    if result.status in ("failed", "unreachable"):
        click.echo(f"{result.host}: {result.status.upper()} — {result.message}")
    click.echo("\n" + recap([result]))
    sys.exit(exit_code([result]))


@fleet.group(name="soul")
def soul():
    """The agents' souls across the fleet: gather what each one learned, for review."""


@soul.command()
@click.argument("targets", nargs=-1)
@click.option("--into", "into", required=True, metavar="REPO",
              help="A git repository (the soul repository's checkout); made when the folder does not exist.")
@click.option("-i", "--inventory", "inventory_path", metavar="INVENTORY",
              help="YAML inventory (default: ./inventory.yml if present).")
@click.option("--limit", "-l", metavar="PATTERN", help="Only hosts or groups matching (fnmatch; commas).")
@click.option("--forks", "-f", default=10, show_default=True, type=click.IntRange(1, 200),
              help="Hosts worked on at once.")
@click.option("--accept-new-host-keys", is_flag=True,
              help="Trust and record the key of a host not yet in known_hosts (never a changed key).")
def collect(targets, into, inventory_path, limit, forks, accept_new_host_keys):
    """Export each host's soul (what its agent learned, typed, with provenance) and commit it into
    REPO as hosts/<host>/ on branch soul/<host>, for review and `git merge`; then `fleet-update
    --soul REPO` spreads what was merged. TARGETS: hosts or groups (default all).
    Exit: 0 all well, 2 a host failed, 4 a host unreachable, 6 both, 130 interrupted."""
    hosts = _select(inventory_path, ",".join(targets) or "all", limit, accept_new_host_keys)
    try:
        repo, made = soul_collect.prepare_repo(Path(into))
    except soul_collect.CollectError as exc:
        raise click.ClickException(f"--into: {exc}") from None
    click.echo(f"Collect the soul of {len(hosts)} host(s) into {repo}"
               + (" (a new git repository)" if made else "") + f": {', '.join(h.name for h in hosts)}")
    click.echo(f"  one branch per host: {soul_collect.BRANCH_PREFIX}<host>, the export in {soul_collect.HOSTS}/<host>/")
    progress = Progress()
    git_lock = threading.Lock()
    results, interrupted = run_hosts(
        hosts, lambda host, should_stop: soul_collect.collect_host(host, repo, git_lock, progress.line, should_stop),
        forks=forks, progress=progress)
    click.echo("\n" + recap(results))
    changed = [r.host for r in results if r.status == soul_collect.CHANGED]
    if changed:
        click.echo(f"\nReview: git -C {repo} diff HEAD...{soul_collect.branch_name(changed[0])}; "
                   f"approve: git -C {repo} merge {' '.join(soul_collect.branch_name(h) for h in changed)}")
    sys.exit(exit_code(results, interrupted))
