"""What the plugin knows of each session.

Hermes keeps only the transcript `compress` last returned, plus what came
after it; the engine should see the whole session, as under OpenClaw. So
each session keeps the engine's history (every message, converted, as the
sidecar holds it) and the fingerprints of the transcript Hermes was left
with: the messages Hermes passes after that are the new ones.

A transcript that does not continue it is told apart by what it holds
(`Session.absorb`). One made of messages the history holds, in order
(notes and summaries the plugin gave Hermes aside), is a projection of a
state already sent (a retry on an older transcript, Hermes dropping its own
scaffolding, a message Hermes edited in place): only its unknown tail is
new, and the history never shrinks. Only when Hermes's transcript goes on
from an earlier message than the history's last (a rewind: Hermes's branch
no longer holds the messages after it) or shares no message with it (another
conversation under this id) is the history cut back, and the sidecar told
it is a reset (`reset: true`, PROTOCOL.md). The sidecar is told only what
changed (PROTOCOL.md, `sync`).
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
        self.resets = 0
        """How many times Hermes's transcript cut the history back."""
        self.confirmed: Optional[int] = None
        """The history's length when the sidecar last answered the same."""
        self._inserted: set[str] = set()
        # Fingerprints of messages the plugin gave Hermes that are not
        # history (the engine's notes and summaries, Hermes's own summaries).
        self._synced: Optional[tuple[int, int, str]] = None
        self._reset = False  # the next sync replaces what the sidecar holds from its base

    def absorb(self, messages: list[dict]) -> int:
        """Brings the history up to `messages`, Hermes's transcript now, and
        returns how many messages of the history came before the new ones."""
        digests = [hermes_digest(message) for message in messages]
        kept = len(self.shown)
        if len(messages) >= kept and digests[:kept] == self.shown:
            new = messages[kept:]
        else:
            new = messages[self._rebase(digests):]
        before = len(self.wire)
        for message in new:
            converted, fingerprint = convert(message, self.tool_ids)
            self.wire.append(converted)
            self.digests.append(fingerprint)
        self.shown = digests
        return before

    def _rebase(self, digests: list[str]) -> int:
        """Where the new messages of a transcript (`digests`) that does not
        continue the last one start; cuts the history back to where the
        transcript leaves it when Hermes's branch no longer holds the rest."""
        held = set(self.digests)
        start = len(digests)  # the new messages: the longest tail the history lacks
        while start > 0 and digests[start - 1] not in held and digests[start - 1] not in self._inserted:
            start -= 1
        last = next((digest for digest in reversed(digests[:start]) if digest in held), None)
        branch = len(self.digests) - self.digests[::-1].index(last) if last is not None else 0
        if branch < len(self.wire) and start < len(digests):
            self._cut(branch)
        return start

    def _cut(self, length: int) -> None:
        """A reset Hermes made: the history is its first `length` messages,
        and the sidecar's copy is replaced from there."""
        del self.wire[length:], self.digests[length:]
        self.resets += 1
        self._reset = True
        if self._synced is not None:
            generation, count, _ = self._synced
            count = min(count, length)
            self._synced = (generation, count, self.digests[count - 1] if count else "")

    def show(self, transcript: list[dict]) -> None:
        """Hermes continues with `transcript`."""
        self.shown = [hermes_digest(message) for message in transcript]
        held = set(self.digests)
        self._inserted.update(digest for digest in self.shown if digest not in held)

    def sync_for(self, generation: int, full: bool = False) -> dict:
        """The `sync` that brings the sidecar's copy (of process `generation`)
        up to the history: only what it lacks, unless `full`; marked a reset
        when Hermes cut the history back since the last one."""
        base = 0
        if not full and self._synced is not None:
            synced_generation, count, last = self._synced
            if synced_generation == generation and 0 < count <= len(self.wire) and self.digests[count - 1] == last:
                base = count
        sync = {
            "base": base,
            "baseDigest": self.digests[base - 1] if base else None,
            "messages": self.wire[base:],
            "digests": self.digests[base:],
        }
        if self._reset:
            sync["reset"] = True
        return sync

    def synced(self, generation: int) -> None:
        """The sidecar of process `generation` now holds the whole history."""
        self._synced = (generation, len(self.wire), self.digests[-1] if self.digests else "")
        self._reset = False

    def needs_sync(self, generation: int) -> bool:
        """Whether the sidecar of process `generation` may lack part of the
        history (or hold what Hermes cut back)."""
        return self._reset or self._synced != (generation, len(self.wire), self.digests[-1] if self.digests else "")

    def unsynced(self) -> None:
        """What the sidecar holds is unknown: the next sync sends it all."""
        self._synced = None
