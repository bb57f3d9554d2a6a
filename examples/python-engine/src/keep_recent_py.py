"""`keep-recent-py`: the keep-recent context engine, written in Python.

Built into a WebAssembly component with componentize-py against the ctxbox
contract (`../../wit`, world `context-engine`); see README.md. The planning
logic lives in `planner.py` (plain Python, unit-tested natively); this module
adapts it to the generated bindings (`wit_world`, produced at build time) and
gives every other export the reference's default answer, like the Rust SDK's
`Engine` trait defaults.
"""

from componentize_py_types import Err

from wit_world import exports
from wit_world.exports import engine
from wit_world.imports import history as wit_history
from wit_world.imports import host, types

import planner

VERSION = "0.1.0"


class HostHistory:
    """The host's `history` resource as the planner sees it. Each method is
    one boundary crossing; the planner makes O(log n) of them."""

    def __init__(self, resource):
        self._resource = resource

    def len(self):
        return self._resource.len()

    def tokens(self, start, end):
        return self._resource.tokens(start, end)

    def is_compaction_summary(self, index):
        return self._resource.kind(index) == types.MessageKind.COMPACTION_SUMMARY

    def tool_result_call(self, index):
        """The call's index if entry `index` is a tool result whose call is in
        the history, else None."""
        pairing = self._resource.tool_pairing(index)
        if isinstance(pairing, wit_history.ToolPairing_ToolResult):
            return pairing.value
        return None


def _note(text):
    """A custom message with one text block, hidden from UIs (the Rust SDK's
    `AgentMessage::note`)."""
    return types.AgentMessage_Custom(
        types.CustomMessage(
            custom_type=planner.ENGINE_ID,
            content=[types.ContentBlock_Text(text)],
            display=False,
            details=None,
        )
    )


def _item(planned):
    if planned[0] == "keep":
        _, start, end = planned
        return engine.AssembledItem_Keep(engine.KeepRange(start=start, end=end))
    return engine.AssembledItem_Insert(_note(planned[1]))


class Engine(exports.Engine):
    """The exported `engine` interface. componentize-py instantiates it once
    per component instance; the engine keeps no state between calls."""

    def info(self):
        return engine.EngineInfo(
            id=planner.ENGINE_ID,
            name="Keep recent (Python)",
            version=VERSION,
            owns_compaction=False,
            # It needs none of the host-added parameters.
            accepted_host_params=[],
            turn_maintenance_mode=None,
        )

    def bootstrap(self, session, history):
        return engine.BootstrapResult(bootstrapped=False, imported_messages=None, reason=None)

    def ingest(self, session, entry, is_heartbeat):
        # The host's transcript keeps the message.
        return engine.IngestResult(ingested=False)

    def ingest_batch(self, session, entries, is_heartbeat):
        ingested = sum(1 for entry in entries if self.ingest(session, entry, is_heartbeat).ingested)
        return engine.IngestBatchResult(ingested_count=ingested)

    def assemble(self, session, history, params):
        items, estimated_tokens = planner.plan(HostHistory(history), params.token_budget)
        return engine.AssembleResult(
            items=[_item(planned) for planned in items],
            estimated_tokens=estimated_tokens,
            system_prompt_addition=None,
            context_projection=None,
        )

    def compact(self, session, history, params):
        try:
            return host.delegate_compaction(params)
        except Err as error:
            # Nothing was compacted: say so truthfully rather than fail the
            # call (an engine error would quarantine the engine).
            host_error = error.value
            return types.CompactResult(
                ok=False,
                compacted=False,
                reason=f"host compaction {host_error.kind.name.lower()}: {host_error.message}",
                summary=None,
                first_kept_entry_id=None,
                tokens_before=history.tokens(0, history.len()),
                tokens_after=None,
                rotated_session=None,
                details=None,
            )

    def after_turn(self, session, history, params):
        return None

    def maintain(self, session, history, reason, runtime_context):
        return engine.MaintainResult(changed=False, rewritten_entries=0, reason=None)

    def prepare_subagent_spawn(self, spawn):
        # Nothing to undo.
        return None

    def rollback_subagent_spawn(self, preparation_id):
        return None

    def on_subagent_ended(self, child_session_key, reason):
        return None

    def dispose(self):
        return None
