"""venv: a virtualenv made with the host's Python, with packages from a shipped wheelhouse only.

The wheelhouse (a folder of wheels on the operator) is streamed to the host as one tar archive
and installed with `pip install --no-index --find-links` (pip itself from the wheelhouse): hosts need no package index, and pip's
own config on the host (extra indexes, find-links) is switched off so nothing else leaks in.
A marker file written last says the venv is complete; without it the venv is rebuilt from scratch,
so an interrupted install never counts as done.
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
    return [f"test -f {sh_path(path)}/{MARKER}"]


@operation("venv")
def venv(ctx: Context, path: str, python: str, wheelhouse: str, wheels_dest: str,
         packages: list[str]) -> Outcome:
    venv_dir, wheels = sh_path(path), sh_path(wheels_dest)
    if ctx.read(marker_command(path)[0]).ok:
        return Outcome(OK, f"{path} complete")
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
        f'pip_wheel=$(ls {wheels}/pip-*.whl | head -n 1)',
        f'{PIP_ISOLATED} {venv_dir}/bin/python "$pip_wheel/pip" install -q --no-index '
        f"--find-links {wheels} " + " ".join(q(p) for p in packages),
        f"touch {venv_dir}/{MARKER}",
    ])
    result = ctx.run(script, input=archive)
    if not result.ok:
        return failed_result(result, "venv + wheel install")
    return Outcome(CHANGED, f"created {path} ({len(archive) // 1024} KiB of wheels)")
