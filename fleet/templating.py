"""Jinja2 for roles: every string in a task is rendered, `when`/`changed_when` are evaluated.
An undefined variable is an error (StrictUndefined), never an empty string."""

from __future__ import annotations

import re
from typing import Any

import jinja2

_env = jinja2.Environment(undefined=jinja2.StrictUndefined, autoescape=False)
_WHOLE_EXPRESSION = re.compile(r"\{\{\s*([^{}]+?)\s*\}\}")


def render(value: Any, variables: dict[str, Any]) -> Any:
    if isinstance(value, str):
        whole = _WHOLE_EXPRESSION.fullmatch(value)
        if whole:  # "{{ x }}" alone keeps x's type (a list stays a list)
            result = _env.compile_expression(whole.group(1), undefined_to_none=False)(**variables)
            if isinstance(result, jinja2.Undefined):
                result._fail_with_undefined_error()  # raises UndefinedError naming the variable
            return result
        return _env.from_string(value).render(**variables) if "{" in value else value
    if isinstance(value, list):
        return [render(v, variables) for v in value]
    if isinstance(value, dict):
        return {k: render(v, variables) for k, v in value.items()}
    return value


def evaluate_expression(expression: str, variables: dict[str, Any]) -> bool:
    return bool(_env.compile_expression(expression, undefined_to_none=False)(**variables))
