"""soul_ask's one call to an LLM: SOUL.md as the system prompt, MEMORY.md as context.

Providers, through their own SDKs (the runtime's optional `ask` extra: `pip install
'soulgraph[ask]'`):

| provider | SDK | key from the environment | endpoint |
|---|---|---|---|
| `anthropic` | `anthropic` | `ANTHROPIC_API_KEY` | `base_url`, else Anthropic's |
| `openai` | `openai` | `OPENAI_API_KEY` | `base_url` (any OpenAI-compatible server), else OpenAI's |

The key is read from the server's environment when the call is made (Hermes passes an MCP
server only what its entry's `env:` names: `ANTHROPIC_API_KEY: ${ANTHROPIC_API_KEY}` there).
It is given to the SDK and to nothing else: no answer, log line or file carries it, and an
error message that would quote it has it cut out. Every call has a deadline and no retries.
"""

from __future__ import annotations

import importlib
import os
from dataclasses import dataclass
from typing import Any, Callable

PROVIDERS = ("anthropic", "openai")
KEY_VARIABLES = {"anthropic": "ANTHROPIC_API_KEY", "openai": "OPENAI_API_KEY"}
DEFAULT_MODELS = {"anthropic": "claude-sonnet-4-5", "openai": "gpt-4o-mini"}
DEFAULT_TIMEOUT = 60.0
MAX_TOKENS = 1024
EXTRA = "pip install 'soulgraph[ask]'"


class AskError(Exception):
    """The question could not be answered; the message says why (never with a key in it)."""


@dataclass(frozen=True)
class Prompt:
    system: str
    messages: list[dict[str, str]]


def prompt(soul_text: str, memory_text: str, history: list[dict[str, str]], question: str) -> Prompt:
    system = soul_text.strip()
    if memory_text.strip():
        system += "\n\n# Memory (MEMORY.md)\n\n" + memory_text.strip()
    return Prompt(system, [*history, {"role": "user", "content": question}])


def ask(provider: str, built: Prompt, *, model: str | None = None, base_url: str | None = None,
        timeout: float = DEFAULT_TIMEOUT) -> str:
    """The provider's answer text; AskError otherwise."""
    if provider not in PROVIDERS:
        raise AskError(f"unknown provider {provider!r} (providers: {', '.join(PROVIDERS)}; any OpenAI-compatible "
                       "server is provider openai with its base_url)")
    key = os.environ.get(KEY_VARIABLES[provider], "")
    if not key and not base_url:
        raise AskError(f"{provider}: no API key: the server's environment has no {KEY_VARIABLES[provider]} "
                       "(in Hermes, add it to the soul server's env in config.yaml)")
    try:
        if provider == "openai":
            return _openai(built, key, model or DEFAULT_MODELS[provider], base_url, timeout)
        return _anthropic(built, key, model or DEFAULT_MODELS[provider], base_url, timeout)
    except AskError as exc:
        raise AskError(_without(str(exc), key)) from None


def _openai(built: Prompt, key: str, model: str, base_url: str | None, timeout: float) -> str:
    openai = _sdk("openai")
    client = openai.OpenAI(api_key=key or "unset", base_url=base_url, timeout=timeout, max_retries=0)
    answer = _guarded(openai, "openai", base_url or "api.openai.com", timeout, lambda: client.chat.completions.create(
        model=model, messages=[{"role": "system", "content": built.system}, *built.messages]))
    if not answer.choices:
        raise AskError("openai: the answer held no choices")
    return answer.choices[0].message.content or ""


def _anthropic(built: Prompt, key: str, model: str, base_url: str | None, timeout: float) -> str:
    anthropic = _sdk("anthropic")
    client = anthropic.Anthropic(api_key=key or "unset", base_url=base_url, timeout=timeout, max_retries=0)
    answer = _guarded(anthropic, "anthropic", base_url or "api.anthropic.com", timeout, lambda: client.messages.create(
        model=model, max_tokens=MAX_TOKENS, system=built.system, messages=built.messages))
    return "".join(getattr(block, "text", "") for block in answer.content if getattr(block, "type", "") == "text")


def _sdk(name: str) -> Any:
    try:
        return importlib.import_module(name)
    except ImportError:
        raise AskError(f"provider {name} needs the {name} package: {EXTRA}") from None


def _guarded(sdk: Any, provider: str, host: str, timeout: float, call: Callable[[], Any]) -> Any:
    """`call()`, its failures as AskError. Both SDKs name their errors alike."""
    try:
        return call()
    except sdk.APITimeoutError:
        raise AskError(f"{provider}: no answer within {timeout:g} s from {host}") from None
    except sdk.APIStatusError as exc:
        raise AskError(f"{provider}: {host} answered HTTP {exc.status_code}: {_short(exc)}") from None
    except sdk.APIConnectionError:
        raise AskError(f"{provider}: cannot reach {host}") from None


def _short(exc: Exception) -> str:
    text = " ".join(str(getattr(exc, "message", "") or exc).split())
    return text[:200] + ("…" if len(text) > 200 else "")


def _without(text: str, key: str) -> str:
    return text.replace(key, "[key]") if key else text
