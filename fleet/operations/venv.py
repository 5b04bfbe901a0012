"""venv: a virtualenv made with the host's Python, with packages from a shipped wheelhouse only.

The wheelhouse (a folder of wheels on the operator) is streamed to the host as one tar archive
and installed with `pip install --no-index --find-links` (pip itself from the wheelhouse): hosts need no package index, and pip's
own config on the host (extra indexes, find-links) is switched off so nothing else leaks in.
A marker file written last says the venv is complete, and lists the packages it was made with;
without it the venv is rebuilt from scratch, so an interrupted install never counts as done. A
complete venv asked for packages it lacks (an extra switched on, `soul_embed`) gets them added in
place, from the same wheelhouse; nothing is ever taken out of a venv in use.
"""

from __future__ import annotations

import io
import tarfile
from pathlib import Path

from fleet.facts import sh_path
from fleet.operations.base import CHANGED, OK, Context, Outcome, failed_result, operation, q, reads

MARKER = ".soulfleet-complete"
PIP_ISOLATED = ("env -u PIP_FIND_LINKS -u PIP_INDEX_URL -u PIP_EXTRA_INDEX_URL -u PIP_CONSTRAINT "
                "PIP_CONFIG_FILE=/dev/null PIP_DISABLE_PIP_VERSION_CHECK=1")


def tar_folder(folder: Path) -> bytes:
    buf = io.BytesIO()
    with tarfile.open(fileobj=buf, mode="w") as tar:
        for path in sorted(folder.iterdir()):
            tar.add(path, arcname=path.name)
    return buf.getvalue()


@reads("venv", "path")
def marker_command(path: str) -> list[str]:
    return [f"cat {sh_path(path)}/{MARKER}"]


def marker_text(packages: list[str]) -> str:
    """What a complete venv's marker holds: the packages it was made with, one a line."""
    return "".join(f"{package}\n" for package in packages)


def installed_packages(text: str) -> set[str]:
    """The packages a complete venv's marker lists (a marker from before lists none: soulgraph)."""
    return {line.strip() for line in text.splitlines() if line.strip()} or {"soulgraph"}


@operation("venv")
def venv(ctx: Context, path: str, python: str, wheelhouse: str, wheels_dest: str,
         packages: list[str]) -> Outcome:
    venv_dir, wheels = sh_path(path), sh_path(wheels_dest)
    marker = ctx.read(marker_command(path)[0])
    wanted = list(dict.fromkeys(packages))
    if marker.ok:
        installed = installed_packages(marker.stdout)
        missing = [package for package in wanted if package not in installed]
        if not missing:
            return Outcome(OK, f"{path} complete")
        return _add_packages(ctx, path, wheelhouse, wheels_dest, missing, sorted(installed | set(wanted)))
    archive = tar_folder(Path(wheelhouse))
    if ctx.check:
        return Outcome(CHANGED, f"would ship {len(archive) // 1024} KiB of wheels and "
                                f"create {path}")
    script = " && ".join([
        f"rm -rf {venv_dir} {wheels}",
        f"mkdir -p {wheels}",
        f"tar -xf - -C {wheels}",
        # pip runs from its shipped wheel: no ensurepip step, and the venv stays pip-free.
        f"{sh_path(python)} -m venv --without-pip {venv_dir}",
        *_pip_install(venv_dir, wheels, wanted),
        f"printf %s {q(marker_text(wanted))} > {venv_dir}/{MARKER}",
    ])
    result = ctx.run(script, input=archive)
    if not result.ok:
        return failed_result(result, "venv + wheel install")
    return Outcome(CHANGED, f"created {path} ({len(archive) // 1024} KiB of wheels)")


def _pip_install(venv_dir: str, wheels: str, packages: list[str]) -> list[str]:
    """Shell steps: install `packages` into the venv from the shipped wheels only, with the pip
    that came with them (the venv has none of its own)."""
    return [
        f'pip_wheel=$(ls {wheels}/pip-*.whl | head -n 1)',
        f'{PIP_ISOLATED} {venv_dir}/bin/python "$pip_wheel/pip" install -q --no-index '
        f"--find-links {wheels} " + " ".join(q(p) for p in packages),
    ]


def _add_packages(ctx: Context, path: str, wheelhouse: str, wheels_dest: str, missing: list[str],
                  listed: list[str]) -> Outcome:
    """Install `missing` into a complete venv from the shipped wheelhouse; the marker then lists
    `listed`. Until the marker is rewritten the venv counts as lacking them, so a run cut short
    simply tries again."""
    venv_dir, wheels = sh_path(path), sh_path(wheels_dest)
    names = ", ".join(missing)
    archive = tar_folder(Path(wheelhouse))
    if ctx.check:
        return Outcome(CHANGED, f"would add {names} to {path} ({len(archive) // 1024} KiB of wheels)")
    script = " && ".join([
        f"mkdir -p {wheels}",
        f"tar -xf - -C {wheels}",
        *_pip_install(venv_dir, wheels, missing),
        f"printf %s {q(marker_text(listed))} > {venv_dir}/{MARKER}.tmp",
        f"mv {venv_dir}/{MARKER}.tmp {venv_dir}/{MARKER}",
    ])
    result = ctx.run(script, input=archive)
    if not result.ok:
        return failed_result(result, f"adding {names} to the venv")
    return Outcome(CHANGED, f"added {names} to {path}")
