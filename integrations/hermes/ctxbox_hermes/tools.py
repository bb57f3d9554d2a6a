"""Tools an engine offers the agent: Hermes's `get_tool_schemas` and
`handle_tool_call`, which Hermes adds to the model's tools and routes calls
of (with the live `messages`).

Protocol 1 of `ctxbox serve` has no engine tools, so an engine offers none
here yet. When the protocol gains them, this module is the one place to
wire: ask the sidecar for the engine's tool schemas (Hermes accepts bare
`{"name", "description", "parameters"}` schemas) and forward each call,
answering a JSON string within the call timeout, an error object when the
sidecar cannot.
"""

from __future__ import annotations

import json
from typing import Optional

from .bridge import Bridge


def tool_schemas(bridge: Bridge) -> list[dict]:
    """The engine's tools: none in protocol 1."""
    return []


def call_tool(bridge: Bridge, name: str, args: dict, messages: Optional[list[dict]]) -> str:
    """The answer to a call of an engine tool, as the JSON string Hermes
    expects. Hermes routes only names `tool_schemas` offered, so with none
    offered this answers an error, as Hermes's base engine does."""
    return json.dumps({"error": f"Unknown context engine tool: {name} (ctxbox engine {bridge.settings.engine})"})
