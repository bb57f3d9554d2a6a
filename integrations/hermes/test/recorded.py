"""Real recorded sessions as Hermes transcripts: the OpenClaw sessions in
tests/fixtures/sessions (tool-heavy, several languages), converted message
by message with the plugin's own `from_openclaw`, repeated (with fresh
tool-call ids) until a transcript is long enough."""

from __future__ import annotations

import json
import os
from typing import Iterator

from ctxbox_hermes.messages import from_openclaw
from ctxbox_hermes.prompt import is_real_user

FIXTURES = os.path.join(os.path.dirname(__file__), "..", "..", "..", "tests", "fixtures", "sessions")
SESSIONS = (
    "kimi-k2-thinking-rust-coding-de-1-compaction.jsonl",
    "deepseek-chat-windows-ops-zh-3-compactions.jsonl",
)


def openclaw_messages(name: str) -> Iterator[dict]:
    """The messages of a recorded OpenClaw session, in order."""
    with open(os.path.join(FIXTURES, name), encoding="utf-8") as lines:
        for line in lines:
            entry = json.loads(line)
            if entry.get("type") == "message" and isinstance(entry.get("message"), dict):
                yield entry["message"]


def recorded_transcript(count: int) -> list[dict]:
    """A Hermes transcript of about `count` messages from the recorded
    sessions, ending before a user message (a finished exchange), so a new
    turn can follow it."""
    transcript: list[dict] = []
    round_ = 0
    while True:
        for name in SESSIONS:
            for message in openclaw_messages(name):
                if message.get("role") not in ("user", "assistant", "toolResult"):
                    continue
                hermes = _renumbered(from_openclaw(message), round_)
                if len(transcript) >= count and is_real_user(hermes):
                    return transcript
                transcript.append(hermes)
        round_ += 1


def _renumbered(message: dict, round_: int) -> dict:
    """Tool-call ids made unique to this repetition of the sessions."""
    if round_ == 0:
        return message
    suffix = f"-r{round_}"
    for call in message.get("tool_calls") or []:
        call["id"] += suffix
        call["call_id"] += suffix
    if message.get("role") == "tool":
        message["tool_call_id"] += suffix
    return message
