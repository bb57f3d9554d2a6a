"""What the plugin knows of each session.

Hermes keeps only the transcript `compress` last returned, plus what came
after it; the engine should see the whole session, as under OpenClaw. So
each session keeps the engine's history (every message, converted, as the
sidecar holds it) and the fingerprints of the transcript Hermes was left
with: the messages Hermes passes after that are the new ones. A transcript
that does not continue it (a resumed or rewound session) replaces the
history. The sidecar is told only what changed (PROTOCOL.md, `sync`).
"""

from __future__ import annotations

import threading
from typing import Optional

from .messages import convert, hermes_digest


class Session:
    """One session's history and sync state; hold `lock` while using it."""

    def __init__(self) -> None:
        self.lock = threading.Lock()
        self.wire: list[dict] = []
        """The engine's history: every message, converted."""
        self.digests: list[str] = []
        """Each message's `hermes_digest`, also what the sidecar is sent as
        its digest."""
        self.tool_ids: dict[str, str] = {}
        """Tool-call ids by every alias (see `messages.to_openclaw`)."""
        self.shown: list[str] = []
        """Fingerprints of the transcript Hermes holds as of the last call."""
        self._synced: Optional[tuple[int, int, str]] = None

    def absorb(self, messages: list[dict]) -> int:
        """Brings the history up to `messages`, Hermes's transcript now, and
        returns how many messages of the history came before the new ones."""
        kept = len(self.shown)
        prefix = [hermes_digest(message) for message in messages[:kept]]
        if len(messages) >= kept and prefix == self.shown:
            new = messages[kept:]
            before = len(self.wire)
        else:
            self.wire, self.digests, self.tool_ids = [], [], {}
            new, prefix, before = messages, [], 0
        for message in new:
            converted, fingerprint = convert(message, self.tool_ids)
            self.wire.append(converted)
            self.digests.append(fingerprint)
            prefix.append(fingerprint)
        self.shown = prefix
        return before

    def show(self, transcript: list[dict]) -> None:
        """Hermes continues with `transcript`."""
        self.shown = [hermes_digest(message) for message in transcript]

    def sync_for(self, generation: int, full: bool = False) -> dict:
        """The `sync` that brings the sidecar's copy (of process `generation`)
        up to the history: only what it lacks, unless `full`."""
        base = 0
        if not full and self._synced is not None:
            synced_generation, count, last = self._synced
            if synced_generation == generation and 0 < count <= len(self.wire) and self.digests[count - 1] == last:
                base = count
        return {
            "base": base,
            "baseDigest": self.digests[base - 1] if base else None,
            "messages": self.wire[base:],
            "digests": self.digests[base:],
        }

    def synced(self, generation: int) -> None:
        """The sidecar of process `generation` now holds the whole history."""
        self._synced = (generation, len(self.wire), self.digests[-1] if self.digests else "")
