"""How every tool call is checked and answered: strict arguments in, one compact form out.

One middleware on `tools/call` (the SDK runs it before its own argument parsing):

- **Arguments** are checked against the tool's published input schema with `jsonschema`,
  strictly: an unknown argument is refused and the known ones named (`parent` for `parents`
  used to be dropped silently); JSON types are exact (`"yes"` and `1` are not booleans, `"5"`
  is not an integer). The refusal is one line, `<argument>: <rule>`, as a tool error the model
  can read and correct, instead of pydantic's multi-line text with URLs.
- **The answer** carries the result once. The SDK puts a pretty-printed JSON copy in `content`
  beside `structuredContent`; hermes-agent 0.19 (`tools/mcp_tool.py`) then hands the model
  `{"result": <that text as a JSON string>, "structuredContent": <the object>}`, so every
  result reached the model about three times over (escaped quotes included). Here `content`
  is the compact JSON of the structured result (`,` and `:` without spaces), and with
  `structured_only` (what the installer writes into Hermes' entry: `--structured-only`)
  `content` is left empty, so Hermes hands the model `{"result": <the object>}`, one copy.
  Clients that read `structuredContent` get it either way, checked against the tool's
  output schema by the SDK.
"""

from __future__ import annotations

import inspect
import json
from typing import Any, Callable

import jsonschema
from mcp.types import CallToolResult, TextContent

TYPE_WORDS = {"boolean": "true or false", "integer": "a whole number", "number": "a number", "string": "text",
              "array": "a list", "object": "an object", "null": "null"}


def compact_json(payload: Any) -> str:
    return json.dumps(payload, ensure_ascii=False, separators=(",", ":"))


def _short(value: Any) -> str:
    text = json.dumps(value, ensure_ascii=False)
    return text if len(text) <= 40 else text[:39] + "…"


def _rule(error: jsonschema.ValidationError) -> str:
    """One jsonschema error as `rule, got value`, in words an agent reads."""
    kind = error.validator
    got = f", got {_short(error.instance)}"
    if kind == "type":
        wanted = error.validator_value if isinstance(error.validator_value, list) else [error.validator_value]
        return "must be " + " or ".join(TYPE_WORDS.get(w, w) for w in wanted) + got
    if kind == "enum":
        return "must be one of " + ", ".join(str(v) for v in error.validator_value) + got
    if kind == "const":
        return f"must be {_short(error.validator_value)}{got}"
    if kind in ("minimum", "exclusiveMinimum"):
        return f"must be {'more than' if kind == 'exclusiveMinimum' else 'at least'} {error.validator_value:g}{got}"
    if kind in ("maximum", "exclusiveMaximum"):
        return f"must be {'less than' if kind == 'exclusiveMaximum' else 'at most'} {error.validator_value:g}{got}"
    if kind == "minLength":
        return "must not be empty" if error.validator_value == 1 else f"must be at least {error.validator_value} characters"
    if kind == "maxLength":
        return f"must be at most {error.validator_value} characters (got {len(error.instance)})"
    if kind == "maxItems":
        return f"must hold at most {error.validator_value} items (got {len(error.instance)})"
    if kind == "minItems":
        return f"must hold at least {error.validator_value} items"
    if kind == "anyOf":  # an optional argument: say what the non-null choice wants
        chosen = [e for e in error.context or () if not (isinstance(e.schema, dict) and e.schema.get("type") == "null")]
        if chosen:
            inner = min(chosen, key=lambda e: e.validator == "type")  # a value rule says more than a type
            if inner.validator == "type":
                return f"must be {TYPE_WORDS.get(inner.validator_value, inner.validator_value)} or null, got {_short(error.instance)}"
            return _rule(inner)
    return error.message


def argument_problem(tool: str, schema: dict[str, Any], arguments: Any) -> str | None:
    """The first thing wrong with `arguments` for `tool`, as one line; None when they fit."""
    if arguments is None:
        arguments = {}
    if not isinstance(arguments, dict):
        return f"{tool}: arguments must be an object of named arguments, got {_short(arguments)}"
    known = list((schema.get("properties") or {}).keys())
    unknown = [name for name in arguments if name not in known]
    if unknown:
        return (f"{tool}: unknown argument{'s' if len(unknown) > 1 else ''} {', '.join(repr(u) for u in unknown)}; "
                f"{tool} takes {', '.join(known) if known else 'no arguments'}")
    errors = sorted(jsonschema.Draft202012Validator(schema).iter_errors(arguments),
                    key=lambda e: (list(e.absolute_path), e.validator != "type"))
    if not errors:
        return None
    error = errors[0]
    if error.validator == "required":
        missing = [name for name in error.validator_value if name not in arguments]
        return f"{tool}: {missing[0] if missing else 'an argument'}: required"
    where = ".".join(str(part) for part in error.absolute_path) or "arguments"
    return f"{tool}: {where}: {_rule(error)}"


def tool_calls(list_tools: Callable[[], Any], *, structured_only: bool = False):
    """The middleware (see the module doc). `list_tools` is the server's own (async) listing,
    read once at the first call so the schemas checked are the schemas published."""
    schemas: dict[str, dict[str, Any]] = {}

    async def middleware(ctx: Any, call_next: Callable[[Any], Any]) -> Any:
        if ctx.method != "tools/call" or not isinstance(ctx.params, dict):
            return await call_next(ctx)
        if not schemas:
            schemas.update({tool.name: tool.input_schema for tool in await list_tools()})
        name = ctx.params.get("name")
        if name in schemas:
            wrong = argument_problem(name, schemas[name], ctx.params.get("arguments"))
            if wrong:
                return CallToolResult(content=[TextContent(type="text", text=wrong)], is_error=True)
        result = await call_next(ctx)  # the wire form: a dict with camelCase keys
        if isinstance(result, dict) and not result.get("isError") and result.get("structuredContent") is not None:
            result["content"] = [] if structured_only else \
                [{"type": "text", "text": compact_json(result["structuredContent"])}]
        return result

    return middleware


def tool_registrar(server: Any) -> Callable[[Any], Callable[[Callable[..., Any]], Any]]:
    """`@tool(annotations)`: register a tool with its docstring cleaned of source indentation
    as its description (the SDK would publish it raw)."""

    def tool(annotations: Any) -> Callable[[Callable[..., Any]], Any]:
        def register(fn: Callable[..., Any]) -> Any:
            return server.tool(annotations=annotations, description=inspect.cleandoc(fn.__doc__ or ""))(fn)
        return register

    return tool
