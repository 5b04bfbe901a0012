"""copy and template: a file has exactly this content and mode; the old one can be backed up.

template renders a Jinja2 file from the role's templates/ folder first. Undefined variables are
errors (StrictUndefined), so a typo never ships an empty value to a host.
"""

from __future__ import annotations

import time
from pathlib import Path

import jinja2

from fleet.facts import sh_path
from fleet.operations.base import (CHANGED, OK, Context, Outcome, OperationError,
                                   failed_result, operation, parse_mode, unified_diff)
from fleet.operations.directory import stat_mode_command


def read_remote(ctx: Context, path: str) -> tuple[bytes | None, int | None]:
    """Content and mode of a file on the host, (None, None) when absent."""
    p = sh_path(path)
    result = ctx.run(f"if [ -f {p} ]; then {stat_mode_command(p)}; cat {p}; else echo absent; fi")
    if result.stdout.startswith("absent"):
        return None, None
    mode_line, _, content = result.stdout.partition("\n")
    # cat's output went through the text decoder; files we manage are UTF-8 text.
    return content.encode(), int(mode_line.strip(), 8)


def ensure_file(ctx: Context, dest: str, content: bytes, mode=None, backup: bool = False) -> Outcome:
    want_mode = parse_mode(mode)
    old, old_mode = read_remote(ctx, dest)
    same_content = old == content
    same_mode = want_mode is None or old_mode == want_mode
    if old is not None and same_content and same_mode:
        return Outcome(OK)
    diff = "" if same_content else unified_diff(dest, old, content)
    what = "create" if old is None else ("update" if not same_content else "set mode of")
    if ctx.check:
        return Outcome(CHANGED, f"would {what} {dest}", diff=diff)
    home = ctx.facts.get("home", "")
    path = dest.replace("~", home, 1) if dest.startswith("~") else dest
    if backup and old is not None and not same_content:
        stamp = time.strftime("%Y%m%dT%H%M%SZ", time.gmtime())
        result = ctx.run(f"cp -p {sh_path(dest)} {sh_path(dest + '.bak-' + stamp)}")
        if not result.ok:
            return failed_result(result, "backup")
    if same_content:
        result = ctx.run(f"chmod {want_mode:o} {sh_path(dest)}")
        if not result.ok:
            return failed_result(result, "chmod")
    else:
        ctx.conn.put(content, path, mode=want_mode if want_mode is not None else old_mode)
    return Outcome(CHANGED, f"{what} {dest}", diff=diff)


@operation("copy")
def copy(ctx: Context, dest: str, content: str | None = None, src: str | None = None,
         mode=None, backup: bool = False) -> Outcome:
    if (content is None) == (src is None):
        raise OperationError("copy needs exactly one of content and src")
    data = content.encode() if content is not None else Path(src).expanduser().read_bytes()
    return ensure_file(ctx, dest, data, mode, backup)


def template_environment(folder: str | Path) -> jinja2.Environment:
    return jinja2.Environment(loader=jinja2.FileSystemLoader(str(folder)),
                              undefined=jinja2.StrictUndefined, keep_trailing_newline=True,
                              autoescape=False)


def render_template(folder: str | Path, name: str, variables: dict) -> str:
    return template_environment(folder).get_template(name).render(**variables)


@operation("template")
def template(ctx: Context, src: str, dest: str, mode=None, backup: bool = False,
             templates_dir: str = "") -> Outcome:
    try:
        text = render_template(templates_dir, src, ctx.vars)
    except jinja2.UndefinedError as exc:
        return Outcome("failed", f"template {src}: {exc}")
    except jinja2.TemplateNotFound:
        raise OperationError(f"template {src} not found in {templates_dir}") from None
    return ensure_file(ctx, dest, text.encode(), mode, backup)
