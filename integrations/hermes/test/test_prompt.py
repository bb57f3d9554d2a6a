"""From an engine's answer to Hermes's transcript, without a sidecar: notes
take a role that keeps user and assistant apart, the latest user turn
stays, and answers that would break a tool call from its result are
refused."""

from __future__ import annotations

import pytest

from ctxbox_hermes.messages import NOTE_KEY, to_openclaw
from ctxbox_hermes.prompt import InvalidPrompt, build_transcript

NOTE = {"insert": {"role": "custom", "customType": "keep-recent", "display": False,
                   "content": [{"type": "text", "text": "[keep-recent: earlier messages were left out]"}]}}


def summary(text: str) -> dict:
    return {"insert": {"role": "custom", "customType": "lossless-summary", "display": False,
                       "content": [{"type": "text", "text": text}]}}


def session() -> list[dict]:
    """user, assistant(call), tool, assistant, user, assistant(call a, b), tool a, tool b, assistant, user"""
    messages = [
        {"role": "user", "content": "first question"},
        {"role": "assistant", "content": "", "tool_calls": [call("c1")]},
        {"role": "tool", "tool_call_id": "c1", "name": "read", "content": "r1"},
        {"role": "assistant", "content": "first answer"},
        {"role": "user", "content": "second question"},
        {"role": "assistant", "content": "", "tool_calls": [call("c2"), call("c3")]},
        {"role": "tool", "tool_call_id": "c2", "name": "read", "content": "r2"},
        {"role": "tool", "tool_call_id": "c3", "name": "read", "content": "r3"},
        {"role": "assistant", "content": "second answer"},
        {"role": "user", "content": "third question"},
    ]
    tool_ids: dict[str, str] = {}
    return [to_openclaw(message, tool_ids) for message in messages]


def call(call_id: str) -> dict:
    return {"id": call_id, "call_id": call_id, "type": "function", "function": {"name": "read", "arguments": "{}"}}


def roles(transcript: list[dict]) -> list[str]:
    return [message["role"] for message in transcript]


def test_a_note_before_a_user_message_is_prefixed_to_it():
    transcript = build_transcript([NOTE, {"keep": [4, 10]}], session())
    assert roles(transcript) == ["user", "assistant", "tool", "tool", "assistant", "user"]
    assert transcript[0]["content"] == "[keep-recent: earlier messages were left out]\n\nsecond question"
    assert transcript[1:] == [m["hermes"] for m in session()[5:]]


def test_a_note_before_an_assistant_message_stands_alone_as_the_user():
    transcript = build_transcript([NOTE, {"keep": [8, 10]}], session())
    assert roles(transcript) == ["user", "assistant", "user"]
    assert transcript[0] == {"role": "user", "content": "[keep-recent: earlier messages were left out]",
                             NOTE_KEY: "keep-recent"}


def test_a_run_of_summaries_becomes_one_message():
    transcript = build_transcript([summary("s1"), summary("s2"), summary("s3"), {"keep": [3, 10]}], session())
    assert roles(transcript)[:2] == ["user", "assistant"]
    assert transcript[0]["content"] == "s1\n\ns2\n\ns3"


def test_a_note_after_a_user_message_is_the_assistant():
    transcript = build_transcript([{"keep": [0, 1]}, NOTE, {"keep": [4, 10]}], session())
    assert roles(transcript)[:3] == ["user", "assistant", "user"]
    assert transcript[1][NOTE_KEY] == "keep-recent"


def test_the_latest_user_turn_is_put_back_in_its_place():
    wire = session()
    wire.append(to_openclaw({"role": "assistant", "content": "third answer"}))
    transcript = build_transcript([NOTE, {"keep": [10, 11]}], wire)
    assert roles(transcript) == ["user", "assistant"]
    assert transcript[0]["content"] == "[keep-recent: earlier messages were left out]\n\nthird question"
    assert transcript[1]["content"] == "third answer"


def test_kept_messages_are_copies():
    wire = session()
    transcript = build_transcript([{"keep": [0, 10]}], wire)
    transcript[0]["content"] = "changed"
    assert wire[0]["hermes"]["content"] == "first question"


@pytest.mark.parametrize("items, why", [
    ([{"keep": [6, 10]}], "does not follow its call"),
    ([NOTE, {"keep": [5, 6]}, {"keep": [9, 10]}], "was left out"),
    ([{"keep": [4, 6]}, NOTE, {"keep": [6, 10]}], "tool call c2"),
    ([{"keep": [0, 11]}], "kept messages 0..11 of 10"),
    ([{"keep": [3]}], "not \\[start, end\\]"),
    ([{"drop": [0, 1]}], "neither keep nor insert"),
    ([], "empty prompt"),
])
def test_answers_that_cannot_be_a_transcript_are_refused(items, why):
    with pytest.raises(InvalidPrompt, match=why):
        build_transcript(items, session())
