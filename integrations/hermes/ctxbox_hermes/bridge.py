"""The sessions of one `ctxbox serve` sidecar: what each Hermes method asks
of it, in protocol terms. One bridge per configuration and process, shared
by every engine object Hermes copies from the registered one.

Every turn Hermes ends (its `post_llm_call` hook) reaches the engine as
`afterTurn` with a `sync` of the turn's messages, as OpenClaw's plugin
commits each turn: the sidecar's copy follows Hermes's conversation, and an
engine that compacts ahead (`lossless`) does so during ordinary turns. Every
`length` the sidecar answers is checked against the plugin's own count.

The sidecar's reverse `complete` (an engine's `host.complete`) is answered
with Hermes's compression model for the session's agent (`completions.py`).

Compressing a session is three calls, each with a `sync` of what changed:
`afterTurn` (the engine hears the new messages; `lossless` stores them and
compacts ahead), `compact` for an engine that owns compaction, and
`assemble` under the compression budget, answered by reference. An engine
that does not own compaction leaves what its prompt still holds over the
budget to the host: the caller's `within`. Whatever goes wrong on the way
(the sidecar down or slow, the engine quarantined and answered for by
`legacy`, an answer that cannot be Hermes's transcript) hands the messages
to the caller's `instead`.
"""

from __future__ import annotations

import logging
import threading
import time
import weakref
from dataclasses import dataclass
from typing import Callable, Optional

from . import completions
from .config import Settings
from .messages import hermes_digest, text_of
from .prompt import InvalidPrompt, build_transcript, is_real_user
from .sessions import Session
from .sidecar import Sidecar, SidecarError, SidecarUnavailable, ensure_dir, serve_argv

NOT_THE_ENGINE = ("legacy", "pass-through")
"""`servedBy` values that mean the engine itself did not answer."""

logger = logging.getLogger(__name__)


class EngineUnavailable(Exception):
    """The engine could not serve this call."""


@dataclass(frozen=True)
class CompressRequest:
    """What Hermes asked for, in the engine's terms."""

    token_budget: int
    current_tokens: Optional[int] = None
    force: bool = False
    instructions: Optional[str] = None
    model: Optional[str] = None


@dataclass(frozen=True)
class Outcome:
    """What `compress` returns and who decided it."""

    messages: list[dict]
    served_by: str
    """The engine's id as the sidecar reports it (`servedBy`: for a `.wasm`
    engine its file stem, `param_echo.wasm` → `param-echo`), or `fallback`
    when the caller's `instead` answered."""
    reason: Optional[str] = None
    """Why `instead` answered."""
    delegated: bool = False
    """Whether the engine's prompt, over the budget, went to `within`."""


Compression = Callable[[list[dict]], list[dict]]
"""The caller's own compression of a message list."""


class Bridge:
    """One sidecar and the sessions it holds."""

    def __init__(self, settings: Settings, sidecar: Optional[Sidecar] = None) -> None:
        self.settings = settings
        self.sidecar = sidecar or Sidecar(
            serve_argv(settings.ctxbox_bin, settings.engine, settings.data_dir, settings.config_file),
            cwd=ensure_dir(settings.data_dir),
            reverse={"complete": self.complete},
        )
        self._lock = threading.Lock()
        self._sessions: dict[str, Session] = {}
        self._renamed: dict[str, str] = {}
        self._info: Optional[tuple[int, dict]] = None
        self._agents: dict[str, weakref.ref] = {}
        self._runtimes: dict[str, dict] = {}
        self._latest_runtime: Optional[dict] = None

    # -- sessions --------------------------------------------------------------

    def session_key(self, session_id: str) -> str:
        """The sidecar's id for Hermes's session `session_id`."""
        with self._lock:
            return self._renamed.get(session_id, session_id)

    def rename(self, old: str, new: str) -> None:
        """Hermes moved the conversation from `old` to `new` at a compaction:
        it stays one session for the engine."""
        if old and new and old != new:
            with self._lock:
                self._renamed[new] = self._renamed.get(old, old)

    def serve(self, session_id: str, agent: object, runtime: dict) -> None:
        """`agent` (an engine object) serves Hermes's session `session_id`
        with the model `runtime` (what its `update_model` said): its turns'
        ends (`turn_ended`) go to it, and its engine's `complete` requests to
        that model."""
        key = self.session_key(session_id)
        with self._lock:
            self._agents[key] = weakref.ref(agent)
            if runtime.get("model"):
                self._runtimes[key] = dict(runtime)
                self._latest_runtime = self._runtimes[key]

    def turn_ended(self, session_id: str = "", conversation_history: Optional[list] = None, **_: object) -> None:
        """Hermes's `post_llm_call` hook: the turn's messages reach the
        engine of the session's agent (`end_turn` of the engine object)."""
        key = self.session_key(str(session_id or ""))
        with self._lock:
            found = self._agents.get(key)
        agent = found() if found is not None else None
        end_turn = getattr(agent, "end_turn", None)
        if callable(end_turn) and isinstance(conversation_history, list):
            end_turn(conversation_history)

    def complete(self, params: dict, deadline: float) -> dict:
        """The sidecar's reverse `complete`: Hermes's compression model for the
        session's agent (the latest agent's when the request names no session
        this bridge serves)."""
        key = params.get("sessionId")
        with self._lock:
            runtime = self._runtimes.get(key) if isinstance(key, str) else None
            runtime = runtime or self._latest_runtime
        return completions.complete(params, runtime, deadline)

    def bootstrap_later(self, session_id: str) -> None:
        """Starts the sidecar and lets the engine set the session up, in the
        background: Hermes does not wait for it."""
        def run() -> None:
            try:
                self.call("bootstrap", {"sessionId": self.session_key(session_id)},
                          time.monotonic() + self.settings.call_timeout_s)
            except (SidecarError, SidecarUnavailable):
                pass  # the next compression syncs the session anyway
        threading.Thread(target=run, daemon=True, name="ctxbox-bootstrap").start()

    def close_session(self, session_id: str) -> None:
        """Forgets the session here and in the sidecar."""
        key = self.session_key(session_id)
        with self._lock:
            self._sessions.pop(key, None)
            self._agents.pop(key, None)
            self._runtimes.pop(key, None)
            for alias in [alias for alias, target in self._renamed.items() if target == key]:
                del self._renamed[alias]
        try:
            self.call("closeSession", {"sessionId": key}, time.monotonic() + self.settings.call_timeout_s)
        except (SidecarError, SidecarUnavailable):
            pass  # a restarted sidecar does not hold it either

    # -- turns -------------------------------------------------------------------

    def end_turn(self, session_id: str, messages: list[dict], token_budget: int) -> None:
        """Hermes ended a turn with `messages` (its transcript now): what is
        new reaches the engine (`afterTurn`, which may compact under
        `token_budget`). Never raises: a failure leaves it to the next call,
        whose `sync` carries it."""
        deadline = time.monotonic() + self.settings.call_timeout_s
        rest = messages[_system_head(messages):]
        key = self.session_key(session_id)
        with self._lock:
            session = self._sessions.setdefault(key, Session())
        with session.lock:
            try:
                before = session.absorb(rest)
                if len(session.wire) > before or session.needs_sync(self.sidecar.generation):
                    self._synced(session, "afterTurn", {"sessionId": key, "tokenBudget": token_budget,
                                                        "prePromptMessageCount": before}, deadline)
            except (SidecarError, SidecarUnavailable, EngineUnavailable) as error:
                logger.info("ctxbox could not hand the engine the turn now (the next call will): %s", error)
            except Exception:  # a bug here must not fail Hermes's turn
                logger.warning("ctxbox end of turn failed unexpectedly", exc_info=True)

    def session_length(self, session_id: str) -> Optional[int]:
        """How many messages of the session the sidecar last said it holds,
        when that agreed with the plugin's count."""
        session = self._session(session_id)
        return session.confirmed if session is not None else None

    def session_resets(self, session_id: str) -> int:
        """How many times Hermes's transcript cut the session's history back."""
        session = self._session(session_id)
        return session.resets if session is not None else 0

    def _session(self, session_id: str) -> Optional[Session]:
        key = self.session_key(session_id)
        with self._lock:
            return self._sessions.get(key)

    # -- compression -----------------------------------------------------------

    def compress(self, session_id: str, messages: list[dict], request: CompressRequest,
                 within: Compression, instead: Compression) -> Outcome:
        """The transcript Hermes continues with: the engine's (passed
        through `within` when the engine leaves compaction to its host and
        its prompt is over the budget), or `instead`'s when the engine
        cannot give one within the call timeout. Leading system messages
        (Hermes's gateway `/compress` passes its system prompt) are kept as
        they are and not shown to the engine."""
        deadline = time.monotonic() + self.settings.call_timeout_s
        pinned = _system_head(messages)
        head, rest = messages[:pinned], messages[pinned:]
        key = self.session_key(session_id)
        with self._lock:
            session = self._sessions.setdefault(key, Session())
        delegated = False
        with session.lock:
            try:
                transcript, over_budget, served_by = self._engine_transcript(key, session, rest, request, deadline)
                reason = None
            except (SidecarError, SidecarUnavailable, EngineUnavailable, InvalidPrompt) as error:
                served_by, reason = "fallback", str(error)
            except Exception as error:  # a bug here must not fail Hermes's turn
                logger.warning("ctxbox compress failed unexpectedly", exc_info=True)
                served_by, reason = "fallback", f"{type(error).__name__}: {error}"
            if served_by == "fallback":
                logger.warning("ctxbox could not compress, Hermes's own compression answers: %s", reason)
                result = instead(messages)
            else:
                if over_budget:
                    transcript, delegated = within(transcript), True
                result = messages if transcript is rest else head + transcript
            if result is not messages:
                session.show(result[_system_head(result):])
        return Outcome(result, served_by, reason, delegated)

    def _engine_transcript(self, key: str, session: Session, messages: list[dict],
                           request: CompressRequest, deadline: float) -> tuple[list[dict], bool, str]:
        """The engine's prompt as Hermes's transcript (`messages` itself
        when it changes nothing), whether it is still over the budget for
        an engine that leaves compaction to its host, and the engine's id
        (`servedBy`)."""
        before = session.absorb(messages)
        owns = self.owns_compaction(deadline)
        params = {"sessionId": key, "tokenBudget": request.token_budget}
        self._synced(session, "afterTurn", {**params, "prePromptMessageCount": before}, deadline)
        if owns:
            self._synced(session, "compact", {
                **params,
                "force": request.force,
                "currentTokenCount": request.current_tokens,
                "compactionTarget": "budget",
                "customInstructions": request.instructions,
            }, deadline)
        latest_user = next((m for m in reversed(messages) if is_real_user(m)), None)
        from . import tools  # imports this module: here, not at the top

        answer = self._synced(session, "assemble", {
            **params,
            "model": request.model,
            "prompt": text_of(latest_user.get("content")) if latest_user else None,
            # The engine's tools as Hermes shows them (as last listed; never
            # asked here), so a note of the engine's can name them.
            "availableTools": tools.listed_names(self),
            "answer": "ranges",
        }, deadline)
        served_by = str(answer.get("servedBy"))
        if served_by in NOT_THE_ENGINE:
            raise EngineUnavailable(f"assemble was answered by {served_by}, not the engine")
        items = answer.get("items")
        if not isinstance(items, list):
            raise InvalidPrompt("the sidecar's assemble answer has no items")
        estimated = answer.get("estimatedTokens")
        over_budget = not owns and isinstance(estimated, int) and estimated > request.token_budget
        if items == [{"keep": [0, len(session.wire)]}] and session.shown == session.digests:
            return messages, over_budget, served_by  # the engine kept all of it, and Hermes holds all of it
        transcript = build_transcript(items, session.wire)
        if len(transcript) == len(messages) and [hermes_digest(m) for m in transcript] == session.shown:
            return messages, over_budget, served_by
        return transcript, over_budget, served_by

    def owns_compaction(self, deadline: float) -> bool:
        """Whether the engine owns compaction (its `info`), asked once per
        sidecar process."""
        generation = self.sidecar.generation
        cached = self._info
        if cached is None or cached[0] != generation or generation == 0:
            answer = self.call("info", {}, deadline)
            info = answer.get("info") or {}
            cached = (self.sidecar.generation, info)
            self._info = cached
        info = cached[1]
        return bool(info.get("ownsCompaction", info.get("owns_compaction", False)))

    # -- calls -------------------------------------------------------------------

    def call(self, method: str, params: dict, deadline: float) -> dict:
        """`method` for the configured engine, answered by `deadline`."""
        remaining = deadline - time.monotonic()
        if remaining <= 0:
            raise SidecarUnavailable(f"{method}: no time left")
        answer = self.sidecar.call(method, {"engine": self.settings.engine, **params}, remaining)
        return answer if isinstance(answer, dict) else {}

    def _synced(self, session: Session, method: str, params: dict, deadline: float) -> dict:
        """A session call carrying a `sync`; on `history-mismatch` (a
        restarted sidecar, one that gave the session up, a copy that
        differs) the whole history is sent. The `length` answered must be
        the history's: otherwise the sidecar holds something else, the next
        call resends it all, and this one fails."""
        def attempt(full: bool) -> dict:
            generation = self.sidecar.generation
            answer = self.call(method, {**params, "sync": session.sync_for(generation, full)}, deadline)
            length = answer.get("length")
            if isinstance(length, int) and not isinstance(length, bool) and length != len(session.wire):
                session.unsynced()
                raise EngineUnavailable(f"after {method} the sidecar holds {length} messages of the session, "
                                        f"the plugin {len(session.wire)}")
            if self.sidecar.generation == generation:
                session.synced(generation)
                session.confirmed = len(session.wire)
            return answer
        try:
            return attempt(False)
        except SidecarError as error:
            if error.code != "history-mismatch":
                raise
            return attempt(True)


def _system_head(messages: list[dict]) -> int:
    """How many system messages lead `messages`."""
    count = 0
    while count < len(messages) and messages[count].get("role") == "system":
        count += 1
    return count
