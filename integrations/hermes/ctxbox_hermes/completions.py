"""The sidecar's reverse `complete` (PROTOCOL.md, "Reverse calls"), answered
with the model Hermes compresses with: Hermes's auxiliary client for its
`compression` task (`agent.auxiliary_client.call_llm`), as Hermes's own
`ContextCompressor` calls it for a summary. So `auxiliary.compression`'s
provider, model, endpoint and key in config.yaml apply, and without them the
agent's own model (the runtime `update_model` named) answers. An engine's
`host.complete` (`lossless`'s summaries) then goes to the agent's model.

The call runs within the request's `deadlineMs` (the auxiliary call's
timeout is what is left of it) and asks at most the request's `maxTokens`
(the server has already capped it by the engine's budget,
`completions.*` in ctxbox.toml).
"""

from __future__ import annotations

import time
from typing import Any, Callable, Optional

from .sidecar import ReverseError

MAIN_RUNTIME_FIELDS = ("model", "provider", "base_url", "api_key", "api_mode")
"""What Hermes's compressor passes `call_llm` as the main runtime."""

_ROLES = ("system", "user", "assistant")

Model = Callable[..., Any]
"""`call_llm`'s signature: keyword arguments in, an OpenAI-style response out."""


def hermes_model() -> Model:
    """Hermes's auxiliary client (imported on first use: tests run without it)."""
    from agent.auxiliary_client import call_llm

    return call_llm


def complete(params: dict, runtime: Optional[dict], deadline: float, model: Optional[Model] = None) -> dict:
    """The answer to one `complete` request's `params`, by `deadline`
    (`time.monotonic()`), through `model` (Hermes's auxiliary client unless
    given) for the agent whose runtime is `runtime`. Raises `ReverseError`."""
    messages, max_tokens = _checked(params)
    if not runtime or not runtime.get("model"):
        raise ReverseError("unavailable", "Hermes has not named this session's model yet")
    remaining = deadline - time.monotonic()
    if remaining <= 0:
        raise ReverseError("cancelled", "no time was left for the model call")
    call = model or hermes_model()
    try:
        response = call(task="compression", main_runtime={key: runtime.get(key) or "" for key in MAIN_RUNTIME_FIELDS},
                        messages=messages, max_tokens=max_tokens, timeout=remaining)
    except RuntimeError as error:
        if "No LLM provider configured" in str(error) or "no API key" in str(error):
            raise ReverseError("unavailable", str(error)) from None
        raise ReverseError("failed", f"{type(error).__name__}: {error}") from None
    except Exception as error:  # the client's own errors: timeouts, HTTP status, network
        raise ReverseError("failed", f"{type(error).__name__}: {error}") from None
    return _answer(response)


def _checked(params: Any) -> tuple[list[dict], Optional[int]]:
    """The chat messages (the system prompt first) and the output cap of a
    `complete` request; `failed` naming a bad field."""
    if not isinstance(params, dict):
        raise ReverseError("failed", "complete: `params` must be an object")
    messages = params.get("messages")
    if not isinstance(messages, list) or not messages:
        raise ReverseError("failed", "complete: `messages` must be a non-empty array")
    chat: list[dict] = []
    system = params.get("systemPrompt")
    if system is not None:
        if not isinstance(system, str):
            raise ReverseError("failed", "complete: `systemPrompt` must be a string")
        chat.append({"role": "system", "content": system})
    for index, message in enumerate(messages):
        role = message.get("role") if isinstance(message, dict) else None
        content = message.get("content") if isinstance(message, dict) else None
        if role not in _ROLES:
            raise ReverseError("failed", f"complete: `messages[{index}].role` must be system, user or assistant")
        if not isinstance(content, str):
            raise ReverseError("failed", f"complete: `messages[{index}].content` must be a string")
        chat.append({"role": role, "content": content})
    max_tokens = params.get("maxTokens")
    if max_tokens is not None and (not isinstance(max_tokens, int) or isinstance(max_tokens, bool) or max_tokens < 1):
        raise ReverseError("failed", "complete: `maxTokens` must be a positive integer")
    return chat, max_tokens


def _answer(response: Any) -> dict:
    """The `complete` result for an OpenAI-style response: its text (reasoning
    blocks stripped, as Hermes's compressor does), token counts and model."""
    try:
        message = response.choices[0].message
    except (AttributeError, IndexError, TypeError):
        raise ReverseError("failed", "the model's answer has no message") from None
    content = message.get("content") if isinstance(message, dict) else getattr(message, "content", None)
    text = content if isinstance(content, str) else ""
    try:
        from agent.agent_runtime_helpers import strip_think_blocks

        text = strip_think_blocks(None, text).strip() or text.strip()
    except ImportError:
        text = text.strip()
    if not text:
        raise ReverseError("failed", "the model answered no text")
    answer: dict[str, Any] = {"text": text}
    usage = getattr(response, "usage", None)
    for field, key in (("prompt_tokens", "inputTokens"), ("completion_tokens", "outputTokens")):
        value = getattr(usage, field, None)
        if isinstance(value, int) and not isinstance(value, bool) and value >= 0:
            answer[key] = value
    model = getattr(response, "model", None)
    if isinstance(model, str) and model:
        answer["model"] = model[:256]
    return answer
