"""The `ctxbox` context engine for Hermes Agent: each method of Hermes's
`ContextEngine` mapped onto ctxbox (see docs/REFERENCE.md, "Hermes Agent").

| Hermes                     | here                                                      |
|----------------------------|-----------------------------------------------------------|
| `update_model`             | the window: `ctxbox.window_tokens`, at most the model's   |
| `update_from_response`     | token counters                                            |
| `post_llm_call` (a hook)   | `end_turn`: the turn's messages reach the engine          |
| `should_compress`          | the prompt reached `ctxbox.threshold` of the window       |
| `compress`                 | `bridge.Bridge.compress`; Hermes's own compressor where   |
|                            | the engine leaves compaction to its host or ctxbox cannot |
|                            | answer (`hermes_compressor.py`)                           |
| `on_session_start`         | `bootstrap` in the background; not at a compaction        |
| `on_session_end`, `…reset` | `closeSession`; not at a compaction                       |
| `get_tool_schemas`         | the engine's tools (`tools`, protocol 2) named            |
|                            | `ctxbox_<tool>`; none when the sidecar cannot say         |
| `handle_tool_call`         | `callTool` in the session; an error result, never a       |
|                            | raise, when the tool fails or ctxbox cannot run it        |
|                            | (`tools.py`)                                              |

No method raises or waits past `ctxbox.call_timeout_ms` because of ctxbox.
Hermes deep-copies the registered engine for every agent: the copies share
the bridge (one sidecar), each keeps its own counters and session.
"""

from __future__ import annotations

import copy
from typing import Any, Dict, List, Optional

from agent.context_engine import ContextEngine
from agent.model_metadata import estimate_messages_tokens_rough

from . import tools
from .bridge import Bridge, CompressRequest, Outcome
from .hermes_compressor import HermesCompressor

ENGINE_NAME = "ctxbox"
"""What `context.engine` names in config.yaml."""


class CtxboxEngine(ContextEngine):
    """Hermes's context engine over a ctxbox sidecar."""

    def __init__(self, bridge: Bridge, compression: Optional[dict] = None) -> None:
        self._bridge = bridge
        self._hermes = HermesCompressor(compression or {})
        self._session_id = ""
        # Set when compress returned a new transcript: Hermes then calls
        # on_session_end for the old one (its memory commit) before
        # announcing the compaction boundary, and the session goes on.
        self._at_boundary = False
        # After a compression that changed nothing, further checks wait for
        # the next model response: the transcript cannot shrink before.
        self._quiet_until_usage = False
        self.threshold_percent = bridge.settings.threshold
        self.stats: Dict[str, Any] = {"served": 0, "delegated": 0, "fallbacks": 0, "unchanged": 0,
                                      "last_fallback": None, "served_by": None}
        # Outcome flags Hermes reads after compress (getattr, not in the ABC).
        self._last_compress_aborted = False
        self._last_compression_made_progress = False
        self._last_summary_error: Optional[str] = None
        self._last_summary_fallback_used = False

    @property
    def name(self) -> str:
        return ENGINE_NAME

    @property
    def window_tokens(self) -> int:
        """The window compression works in."""
        window = self._bridge.settings.window_tokens or self.context_length
        return min(window, self.context_length) if self.context_length else window

    def __deepcopy__(self, memo: dict) -> "CtxboxEngine":
        copied = copy.copy(self)
        copied._hermes = self._hermes.for_another_agent()
        copied.stats = dict(self.stats)
        return copied

    # -- the model and its usage -------------------------------------------------

    def update_model(self, model: str, context_length: int, base_url: str = "", api_key: str = "",
                     provider: str = "", api_mode: str = "", max_tokens: Optional[int] = None) -> None:
        self.context_length = context_length
        self.threshold_tokens = int(self.window_tokens * self._bridge.settings.threshold)
        runtime = dict(model=model, context_length=context_length, base_url=base_url, api_key=api_key,
                       provider=provider, api_mode=api_mode)
        if max_tokens is not None:
            runtime["max_tokens"] = max_tokens
        self._hermes.update_model(**runtime)
        if self._session_id:
            self._bridge.serve(self._session_id, self, self._hermes.runtime)

    def update_from_response(self, usage: Dict[str, Any]) -> None:
        self.last_prompt_tokens = _count(usage.get("prompt_tokens"))
        self.last_completion_tokens = _count(usage.get("completion_tokens"))
        self.last_total_tokens = _count(usage.get("total_tokens"))
        self._quiet_until_usage = False
        self._at_boundary = False

    def should_compress(self, prompt_tokens: Optional[int] = None) -> bool:
        tokens = self.last_prompt_tokens if prompt_tokens is None else prompt_tokens
        return not self._quiet_until_usage and self.threshold_tokens > 0 and tokens >= self.threshold_tokens

    # -- compression -------------------------------------------------------------

    def compress(self, messages: List[Dict[str, Any]], current_tokens: Optional[int] = None,
                 focus_topic: Optional[str] = None, force: bool = False,
                 memory_context: str = "") -> List[Dict[str, Any]]:
        self._bridge.serve(self._session_key(), self, self._hermes.runtime)
        request = CompressRequest(
            token_budget=self._budget(messages, current_tokens),
            current_tokens=current_tokens,
            force=force,
            instructions=_instructions(focus_topic, memory_context),
            model=self._hermes.runtime.get("model") or None,
        )
        extra: Dict[str, Any] = {"focus_topic": focus_topic}
        if memory_context:
            extra["memory_context"] = memory_context
        outcome = self._bridge.compress(
            self._session_key(), messages, request,
            within=lambda transcript: self._hermes.within(self.window_tokens, transcript, **extra),
            instead=lambda original: self._hermes.instead(original, current_tokens, force, **extra),
        )
        changed = outcome.messages is not messages and outcome.messages != messages
        self._record(outcome, changed)
        if changed:
            self.compression_count += 1
        return outcome.messages

    def end_turn(self, messages: List[Dict[str, Any]]) -> None:
        """Hermes ended a turn of this agent's session with `messages` (its
        `post_llm_call` hook, through the bridge): the engine hears it, and
        may compact ahead within the window's share for the messages."""
        if _in_background_review():
            return
        budget = self._budget(messages, self.last_prompt_tokens or None, 1.0)
        self._bridge.end_turn(self._session_key(), messages, budget)

    def _budget(self, messages: list[dict], current_tokens: Optional[int], share: Optional[float] = None) -> int:
        """Tokens the engine may fill: `share` of the window (the target share
        by default), less what the request spends besides the messages
        (system prompt, tool schemas): `current_tokens` includes it,
        Hermes's estimate of the messages does not."""
        target = int(self.window_tokens * (self._bridge.settings.target if share is None else share))
        overhead = 0
        if current_tokens and current_tokens > 0:
            overhead = max(0, current_tokens - estimate_messages_tokens_rough(messages))
        return max(target // 4, target - overhead, 1)

    def _record(self, outcome: Outcome, changed: bool) -> None:
        # When Hermes's compressor ran, Hermes reads its outcome flags off
        # the engine. An abort counts only when it answered instead of the
        # engine: Hermes then keeps the messages it had. (Compressing the
        # engine's prompt further, an abort leaves that prompt, still valid.)
        fallback = outcome.served_by == "fallback"
        hermes = self._hermes.last if fallback or outcome.delegated else None
        self._last_compress_aborted = fallback and bool(getattr(hermes, "_last_compress_aborted", False))
        self._last_summary_error = getattr(hermes, "_last_summary_error", None)
        self._last_summary_fallback_used = bool(getattr(hermes, "_last_summary_fallback_used", False))
        self._last_compression_made_progress = changed
        self._at_boundary = changed
        self._quiet_until_usage = not changed
        if outcome.served_by == "fallback":
            self.stats["fallbacks"] += 1
            self.stats["last_fallback"] = outcome.reason
            return
        self.stats["served_by"] = outcome.served_by  # the engine's id, as the sidecar reports it
        if changed:
            self.stats["served"] += 1
            self.stats["delegated"] += outcome.delegated
        else:
            self.stats["unchanged"] += 1

    # -- sessions ----------------------------------------------------------------

    def on_session_start(self, session_id: str, **kwargs: Any) -> None:
        if kwargs.get("boundary_reason") == "compression":
            self._bridge.rename(str(kwargs.get("old_session_id") or ""), session_id)
            self._at_boundary = False
        else:
            self._bridge.bootstrap_later(session_id)
        self._session_id = session_id
        self._bridge.serve(session_id, self, self._hermes.runtime)

    def on_session_end(self, session_id: str, messages: List[Dict[str, Any]]) -> None:
        if self._at_boundary:
            return
        self._bridge.close_session(session_id)
        if session_id == self._session_id:
            self._session_id = ""

    def on_session_reset(self) -> None:
        super().on_session_reset()
        if self._session_id:
            self._bridge.close_session(self._session_id)
            self._session_id = ""
        self._at_boundary = False
        self._quiet_until_usage = False

    def _session_key(self) -> str:
        if not self._session_id:
            # compress before on_session_start: one session per engine copy.
            self._session_id = f"hermes-{id(self):x}"
        return self._session_id

    # -- tools and status ----------------------------------------------------------

    def get_tool_schemas(self) -> List[Dict[str, Any]]:
        return tools.tool_schemas(self._bridge)

    def handle_tool_call(self, name: str, args: Dict[str, Any], **kwargs: Any) -> str:
        # A tool call changes no session history: the live `messages` are not sent.
        return tools.call_tool(self._bridge, self._session_key(), name, args)

    def get_status(self) -> Dict[str, Any]:
        status = super().get_status()
        status.update({
            "engine": self._bridge.settings.engine,
            "window_tokens": self.window_tokens,
            "sidecar_pid": self._bridge.sidecar.pid,
            "sidecar_restarts": self._bridge.sidecar.deaths,
            "session_length": self._bridge.session_length(self._session_id) if self._session_id else None,
            "session_resets": self._bridge.session_resets(self._session_id) if self._session_id else 0,
            **self.stats,
        })
        return status


def _instructions(focus_topic: Optional[str], memory_context: str) -> Optional[str]:
    """Hermes's `/compress <focus>` and memory-provider context, as the
    engine's custom instructions."""
    parts = []
    if focus_topic:
        parts.append(f"Focus on: {focus_topic}")
    if memory_context and memory_context.strip():
        parts.append(f"Context from memory providers:\n{memory_context.strip()}")
    return "\n\n".join(parts) or None


def _in_background_review() -> bool:
    """Whether this thread runs Hermes's background review: a fork of the
    agent that shares its session id and ends a turn of its own (a review
    prompt over a snapshot of the conversation), which is not the
    conversation. Hermes marks the fork's thread with a tool whitelist
    (`agent/background_review.py`, `hermes_cli.plugins.set_thread_tool_whitelist`)."""
    try:
        from hermes_cli import plugins
    except ImportError:
        return False
    return getattr(getattr(plugins, "_thread_tool_whitelist", None), "allowed", None) is not None


def _count(value: Any) -> int:
    return int(value) if isinstance(value, (int, float)) and not isinstance(value, bool) else 0
