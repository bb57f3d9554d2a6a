"""Tools an engine offers the agent: Hermes's `get_tool_schemas` and
`handle_tool_call` over protocol 2's `tools` and `callTool`
(integrations/openclaw/PROTOCOL.md).

Hermes asks for the schemas once per agent (when it builds the agent's tool
list) and routes calls of exactly those names to the engine. The names are
the engine's own with the prefix `ctxbox_` (as the OpenClaw plugin names
them), so an engine's `grep` cannot shadow one of Hermes's tools; a call is
mapped back to the engine's name.

Neither method raises or waits past `ctxbox.call_timeout_ms`: a sidecar that
is down, slow or speaks only protocol 1 offers no tools, and a call that
cannot be served answers Hermes an error result (`{"error": …}`), which the
model reads and the turn goes on. A tool that hangs is cut by the sidecar at
the engine's call deadline (the sandbox's `callTimeoutMs`) and the engine is
quarantined; its tools are then not offered until the quarantine lifts.
"""

from __future__ import annotations

import json
import logging
import re
import threading
import time
import weakref
from typing import Any, Optional

from .bridge import Bridge
from .sidecar import SidecarError, SidecarUnavailable

TOOL_PREFIX = "ctxbox_"
"""What an engine's tool is called in Hermes: this prefix and its own name."""

LIST_TTL_S = 30.0
"""How long a listing (or a failure to get one) is reused for the same
sidecar process: an engine's tools change when it is quarantined or its
quarantine lifts, and a sidecar that is down is not asked at every agent."""

_NAME = re.compile(r"^[A-Za-z0-9_-]{1,64}$")
"""Tool names model APIs accept (OpenAI's function-name rule)."""

logger = logging.getLogger(__name__)


class Catalog:
    """The configured engine's tools as its sidecar last reported them,
    shared by every engine copy of one bridge."""

    def __init__(self, bridge: Bridge) -> None:
        self._bridge = bridge
        self._lock = threading.Lock()  # one listing at a time
        self._known: Optional[tuple[int, float, list[dict]]] = None  # generation, asked at, schemas
        self._problem: Optional[str] = None

    def schemas(self) -> list[dict]:
        """Hermes's bare schemas (`name`, `description`, `parameters`) of the
        engine's tools, from the cache while it is fresh, else asked of the
        sidecar within the call timeout; empty when it cannot answer."""
        cached = self._fresh()
        if cached is not None:
            return cached
        timeout = self._bridge.settings.call_timeout_s
        deadline = time.monotonic() + timeout
        if not self._lock.acquire(timeout=timeout):
            return []  # another thread is asking; it was slower than our time
        try:
            cached = self._fresh()
            if cached is not None:
                return cached
            try:
                answer = self._bridge.call("tools", {}, deadline)
                schemas = self._convert(answer.get("tools"))
                self._problem = None
            except (SidecarError, SidecarUnavailable) as error:
                schemas = []
                problem = str(error)
                if getattr(error, "code", None) == "unknown-method" or self._bridge.sidecar.protocol == 1:
                    problem = "the sidecar speaks protocol 1, which has no engine tools"
                if problem != self._problem:
                    logger.warning("ctxbox could not list the engine's tools: %s", problem)
                self._problem = problem
            except Exception:  # a bug here must not fail Hermes's agent
                logger.warning("ctxbox could not list the engine's tools", exc_info=True)
                schemas = []
            # Kept for the process that answered (or failed to): a new one is asked again.
            self._known = (self._bridge.sidecar.generation, time.monotonic(), schemas)
            return list(schemas)
        finally:
            self._lock.release()

    def forget(self) -> None:
        """The next `schemas` asks the sidecar again (an engine's tool failed:
        it may be quarantined now)."""
        self._known = None

    def _fresh(self) -> Optional[list[dict]]:
        known = self._known
        if known is None:
            return None
        generation, asked_at, schemas = known
        if generation != self._bridge.sidecar.generation or time.monotonic() - asked_at > LIST_TTL_S:
            return None
        return list(schemas)

    def _convert(self, tools: Any) -> list[dict]:
        schemas = []
        names = [tool.get("name") for tool in tools if isinstance(tool, dict) and isinstance(tool.get("name"), str)] \
            if isinstance(tools, list) else []
        for tool in tools if isinstance(tools, list) else []:
            name = tool.get("name") if isinstance(tool, dict) else None
            parameters = tool.get("parameters") if isinstance(tool, dict) else None
            if not isinstance(name, str) or not _NAME.match(TOOL_PREFIX + name) or not isinstance(parameters, dict):
                logger.warning("ctxbox: the engine reported a tool Hermes cannot offer: %s", json.dumps(tool)[:200])
                continue
            description = tool.get("description")
            schemas.append({
                "name": TOOL_PREFIX + name,
                "description": shown_names(description, names) if isinstance(description, str) and description
                else f"The ctxbox engine's tool {name}.",
                "parameters": parameters,
            })
        return schemas


def shown_names(description: str, names: list[str]) -> str:
    """`description` with each of the engine's tool `names` it mentions in
    backticks (`` `expand` ``) renamed as Hermes shows the tool
    (`` `ctxbox_expand` ``): an engine describes its tools by its own names."""
    for name in names:
        description = description.replace(f"`{name}`", f"`{TOOL_PREFIX}{name}`")
    return description


_catalogs: "weakref.WeakKeyDictionary[Bridge, Catalog]" = weakref.WeakKeyDictionary()
_catalogs_lock = threading.Lock()


def catalog(bridge: Bridge) -> Catalog:
    """The bridge's catalog, made on first use."""
    with _catalogs_lock:
        found = _catalogs.get(bridge)
        if found is None:
            found = _catalogs[bridge] = Catalog(bridge)
        return found


def listed_names(bridge: Bridge) -> list[str]:
    """The names Hermes shows the engine's tools by, as the sidecar last
    listed them (`ctxbox_grep`, …); empty when no fresh listing is at hand.
    Never asks the sidecar."""
    with _catalogs_lock:
        found = _catalogs.get(bridge)
    known = found._fresh() if found is not None else None
    return [schema["name"] for schema in known or []]


def tool_schemas(bridge: Bridge) -> list[dict]:
    """The engine's tools as Hermes's bare schemas; never raises."""
    try:
        return catalog(bridge).schemas()
    except Exception:
        logger.warning("ctxbox could not list the engine's tools", exc_info=True)
        return []


def call_tool(bridge: Bridge, session_id: str, name: str, args: Any) -> str:
    """Runs the engine's tool for Hermes's `name` (`ctxbox_<tool>`) in the
    session, answering the JSON string Hermes expects: `{"result": text}`,
    or `{"error": text}` when the tool failed or ctxbox could not run it.
    Never raises; answers within the call timeout."""
    if not isinstance(name, str) or not name.startswith(TOOL_PREFIX) or len(name) == len(TOOL_PREFIX):
        return _error(f"Unknown context engine tool: {name} (ctxbox engine tools are named {TOOL_PREFIX}…)")
    tool = name[len(TOOL_PREFIX):]
    params = {"sessionId": bridge.session_key(session_id), "name": tool,
              "arguments": args if isinstance(args, dict) else {}}
    try:
        answer = bridge.call("callTool", params, time.monotonic() + bridge.settings.call_timeout_s)
    except SidecarError as error:
        return _error(f"ctxbox could not run {name}: {error.code}: {error.message}")
    except SidecarUnavailable as error:
        return _error(f"ctxbox could not run {name}: {error}")
    except Exception as error:  # a bug here must not fail Hermes's turn
        logger.warning("ctxbox tool call failed unexpectedly", exc_info=True)
        return _error(f"ctxbox could not run {name}: {type(error).__name__}: {error}")
    content = answer.get("content")
    text = content if isinstance(content, str) else json.dumps(content if content is not None else "")
    if answer.get("isError") is True:
        # The engine may be quarantined now: the next agent asks again.
        catalog(bridge).forget()
        return _error(text or f"{name} failed", servedBy=answer.get("servedBy"))
    return json.dumps({"result": text, "servedBy": answer.get("servedBy")}, ensure_ascii=False)


def _error(message: str, **extra: Any) -> str:
    return json.dumps({"error": message, **{k: v for k, v in extra.items() if v is not None}}, ensure_ascii=False)
