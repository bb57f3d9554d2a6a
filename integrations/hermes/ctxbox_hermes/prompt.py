"""From an engine's assembled prompt to the transcript Hermes continues with.

Hermes's `compress` returns the new message list, and Hermes sends that list
as it is and keeps it as the session's transcript. So what an engine
assembled is turned into a valid OpenAI message sequence here:

* kept messages are the session's own, returned unchanged (fresh copies);
* a run of engine-made notes (`keep-recent`'s "left out" line, `lossless`'s
  summaries) becomes one message whose role is chosen by the rule Hermes's
  own compressor uses for its summary, so no two user or two assistant
  messages meet (Hermes would merge them in place); when no role fits, the
  note is prefixed to the next message, as Hermes does;
* the latest real user message stays, put back in its place if the engine
  left it out (Hermes would insert it itself otherwise);
* tool results follow their call, and a call whose result the session holds
  keeps it: an answer that breaks this is refused (`InvalidPrompt`).
"""

from __future__ import annotations

import copy
from dataclasses import dataclass
from typing import Any, Optional

from .messages import HERMES_FIELD, NOTE_KEY, call_ids, from_openclaw, text_of

SYNTHETIC_USER_FLAGS = (
    NOTE_KEY,
    "_compressed_summary",
    "_todo_snapshot_synthetic",
    "_empty_recovery_synthetic",
    "_verification_stop_synthetic",
    "_pre_verify_synthetic",
)
"""Keys that mark a user-role message Hermes or an engine made up, not the
user (Hermes 0.19.0's `_SYNTHETIC_USER_FLAGS` plus summaries and notes)."""


class InvalidPrompt(Exception):
    """The engine's answer cannot be Hermes's transcript."""


@dataclass
class Entry:
    """A message of the prompt and, for a kept one, its place in the session."""

    position: Optional[int]
    message: dict


def build_transcript(items: list, wire: list[dict]) -> list[dict]:
    """The transcript for an `assemble` answer told by reference (`items`:
    `{"keep": [start, end]}` over `wire`, the session as the sidecar holds
    it, or `{"insert": message}`). Raises `InvalidPrompt`."""
    entries = materialize(items, wire)
    history = [message[HERMES_FIELD] for message in wire]
    entries = keep_latest_user(entries, history)
    transcript = place_notes(entries)
    check_tool_pairs(transcript, history)
    return transcript


def materialize(items: list, wire: list[dict]) -> list[Entry]:
    """The prompt's messages, kept ones as copies of the session's own."""
    entries: list[Entry] = []
    for item in items:
        if isinstance(item, dict) and "keep" in item:
            start, end = _range(item["keep"], len(wire))
            entries.extend(Entry(index, from_openclaw(wire[index])) for index in range(start, end))
        elif isinstance(item, dict) and isinstance(item.get("insert"), dict):
            entries.append(Entry(None, from_openclaw(item["insert"])))
        else:
            raise InvalidPrompt(f"an assembled item is neither keep nor insert: {str(item)[:200]}")
    if not entries:
        raise InvalidPrompt("the engine assembled an empty prompt")
    return entries


def keep_latest_user(entries: list[Entry], history: list[dict]) -> list[Entry]:
    """`entries`, with the session's latest real user message put back
    before the first later message if the engine left it out."""
    latest = next((index for index in range(len(history) - 1, -1, -1) if is_real_user(history[index])), None)
    if latest is None or any(entry.position == latest for entry in entries):
        return entries
    restored = Entry(latest, copy.deepcopy(history[latest]))
    at = next((i for i, entry in enumerate(entries) if entry.position is not None and entry.position > latest),
              len(entries))
    return entries[:at] + [restored] + entries[at:]


def place_notes(entries: list[Entry]) -> list[dict]:
    """The messages, each run of engine notes turned into one message."""
    transcript: list[dict] = []
    index = 0
    while index < len(entries):
        message = entries[index].message
        if NOTE_KEY not in message:
            transcript.append(message)
            index += 1
            continue
        end = index
        while end < len(entries) and NOTE_KEY in entries[end].message:
            end += 1
        notes = [entry.message for entry in entries[index:end]]
        text = "\n\n".join(text_of(note.get("content")) for note in notes)
        following = entries[end].message if end < len(entries) else None
        role = _note_role(transcript[-1].get("role") if transcript else None, following)
        if role is None:
            transcript.append(_prefixed(text, following))
            end += 1
        else:
            transcript.append({"role": role, "content": text, NOTE_KEY: notes[0][NOTE_KEY]})
        index = end
    return transcript


def check_tool_pairs(transcript: list[dict], history: list[dict]) -> None:
    """Raises `InvalidPrompt` unless every tool result directly follows its
    call (after the call's other results) and every call whose result the
    session holds keeps it."""
    answered = {str(message.get("tool_call_id")) for message in history if message.get("role") == "tool"}
    open_calls: list[set[str]] = []
    seen: set[str] = set()

    def close_turn() -> None:
        for aliases in open_calls:
            if aliases & answered and not aliases & seen:
                raise InvalidPrompt(f"the result of tool call {sorted(aliases)[0]} was left out")

    for message in transcript:
        role = message.get("role")
        if role == "tool":
            call = str(message.get("tool_call_id"))
            if not any(call in aliases for aliases in open_calls):
                raise InvalidPrompt(f"the result of tool call {call} does not follow its call")
            seen.add(call)
            continue
        close_turn()
        open_calls, seen = [], set()
        if role == "assistant":
            open_calls = [call_ids(call) for call in message.get("tool_calls") or [] if isinstance(call, dict)]
    close_turn()


def is_real_user(message: dict) -> bool:
    """Whether `message` is something the user said."""
    return (message.get("role") == "user"
            and not any(message.get(flag) for flag in SYNTHETIC_USER_FLAGS)
            and bool(text_of(message.get("content")).strip()))


def _note_role(previous: Optional[str], following: Optional[dict]) -> Optional[str]:
    """The role a note between `previous` (a role, None at the start) and
    `following` takes, by Hermes's rule for its own summary; None when no
    role avoids a same-role neighbour (then the note is prefixed to
    `following`). At the start it is `user`: providers such as Anthropic
    require the first message to be one."""
    leading = previous in (None, "system")
    role = "user" if leading or previous in ("assistant", "tool") else "assistant"
    if following is None or following.get("role") != role:
        return role
    flipped = "assistant" if role == "user" else "user"
    if not leading and flipped != previous:
        return flipped
    return None


def _prefixed(text: str, message: dict) -> dict:
    """A copy of `message` whose content starts with `text`."""
    merged = dict(message)
    content: Any = message.get("content")
    if isinstance(content, list):
        merged["content"] = [{"type": "text", "text": text}] + content
    else:
        existing = text_of(content)
        merged["content"] = f"{text}\n\n{existing}" if existing else text
    # The exact bytes Hermes sent for the old content are stale now.
    merged.pop("api_content", None)
    return merged


def _range(keep: Any, length: int) -> tuple[int, int]:
    if not (isinstance(keep, list) and len(keep) == 2 and all(isinstance(value, int) for value in keep)):
        raise InvalidPrompt(f"a kept range is not [start, end]: {keep!r}")
    start, end = keep
    if not 0 <= start <= end <= length:
        raise InvalidPrompt(f"the sidecar kept messages {start}..{end} of {length}")
    return start, end
