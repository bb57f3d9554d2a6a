"""The message conversion, without Hermes: every field of every kind of
Hermes message survives the round trip through the protocol's shape, the
engine's view of each is right, and what engines make up comes back as
Hermes messages."""

from __future__ import annotations

import copy
import json

import pytest

from ctxbox_hermes.messages import (
    HERMES_FIELD,
    NOTE_KEY,
    from_openclaw,
    hermes_digest,
    to_openclaw,
)
from recorded import SESSIONS, openclaw_messages

PNG = "iVBORw0KGgoAAAANSUhEUgAAAAEAAAABCAYAAAAfFcSJAAAADUlEQVR42mNk+M9QDwADhgGAWjR9awAAAABJRU5ErkJggg=="

# Every shape Hermes 0.19.0 keeps in a transcript, with every field it uses.
HERMES_MESSAGES = [
    {"role": "system", "content": "You are Hermes."},
    {"role": "user", "content": "plain question", "api_content": "plain question\n\n[injected context]"},
    {"role": "user", "content": [
        {"type": "text", "text": "what is in these?"},
        {"type": "image_url", "image_url": {"url": f"data:image/png;base64,{PNG}", "detail": "high"}},
        {"type": "image_url", "image_url": {"url": "https://example.com/cat.jpg"}},
        {"type": "input_audio", "input_audio": {"data": "UklGRg==", "format": "wav"}},
        {"type": "file", "file": {"filename": "a.pdf", "file_data": "JVBERi0="}},
    ]},
    {"role": "assistant", "content": "", "reasoning": "let me think", "finish_reason": "tool_calls",
     "reasoning_content": "let me think ", "reasoning_details": [
         {"type": "reasoning.text", "text": "let me think", "signature": "sig-1", "format": "anthropic-claude-v1"},
         {"type": "reasoning.encrypted", "data": "b64==", "id": "rs_1"}],
     "tool_calls": [
         {"id": "call_1", "call_id": "call_1", "response_item_id": "fc_1", "type": "function",
          "function": {"name": "read_file", "arguments": "{\"path\": \"a.txt\", \"offset\": 0}"},
          "extra_content": {"google": {"thought_signature": "CsYBAY8"}}},
         {"id": "fc_2", "call_id": "call_2", "type": "function",
          "function": {"name": "terminal", "arguments": "not json {"}},
     ],
     "codex_reasoning_items": [{"type": "reasoning", "encrypted_content": "gAAA"}],
     "codex_message_items": [{"type": "message", "id": "msg_1"}],
     "anthropic_content_blocks": [{"type": "thinking", "thinking": "hmm", "signature": "s"}]},
    {"role": "tool", "name": "read_file", "tool_name": "read_file", "content": "contents of a.txt",
     "tool_call_id": "call_1", "_tool_output_risk": "low", "effect_disposition": "read_only"},
    # A result that names its call by `id` (fc_…) rather than `call_id`.
    {"role": "tool", "name": "terminal", "tool_name": "terminal", "tool_call_id": "fc_2", "content": [
        {"type": "text", "text": "screenshot:"},
        {"type": "image_url", "image_url": {"url": f"data:image/png;base64,{PNG}"}}]},
    {"role": "assistant", "content": None, "reasoning": None, "finish_reason": "stop",
     "_thinking_prefill": True, "some_future_key": {"nested": [1, 2.5, None, True]}},
    {"role": "assistant", "content": "done: ümlauts, 汉字, emoji 🦀", "reasoning": "ok", "finish_reason": "length"},
    {"role": "user", "content": "[CONTEXT COMPACTION — REFERENCE ONLY] earlier...", "_compressed_summary": True},
    {"role": "user", "content": "Your active task list", "_todo_snapshot_synthetic": True},
    {"role": "user", "content": "[keep-recent: 3 earlier messages left out]", NOTE_KEY: "keep-recent"},
    {"role": "developer", "content": "be brief"},
    {"content": "a message with no role"},
]


@pytest.mark.parametrize("message", HERMES_MESSAGES, ids=lambda m: str(m.get("role")))
def test_every_field_survives_the_round_trip(message):
    sent = json.loads(json.dumps(to_openclaw(message)))  # what crosses the wire
    assert from_openclaw(sent) == message


def test_the_round_trip_gives_copies_and_drops_only_the_persistence_marker():
    message = {"role": "user", "content": "hi", "_db_persisted": True}
    converted = to_openclaw(message)
    back = from_openclaw(converted)
    assert back == {"role": "user", "content": "hi"}
    back["content"] = "changed"
    assert from_openclaw(converted)["content"] == "hi", "each answer is a fresh copy"
    assert hermes_digest(message) == hermes_digest({"role": "user", "content": "hi"})


def test_the_engine_sees_text_reasoning_images_and_paired_tool_calls():
    tool_ids: dict[str, str] = {}
    system, user, multimodal, assistant, result, image_result = (
        to_openclaw(message, tool_ids) for message in HERMES_MESSAGES[:6])
    assert system["role"] == "custom" and system["customType"] == "hermes-system" and system["display"] is False
    assert user == {"role": "user", "content": "plain question", HERMES_FIELD: HERMES_MESSAGES[1]}
    assert multimodal["content"][:3] == [
        {"type": "text", "text": "what is in these?"},
        {"type": "image", "data": PNG, "mimeType": "image/png"},
        {"type": "image", "data": "", "mimeType": "", "url": "https://example.com/cat.jpg"},
    ]
    assert [block["type"] for block in multimodal["content"][3:]] == ["input_audio", "file"]
    assert assistant["stopReason"] == "toolUse"
    assert assistant["content"] == [
        {"type": "thinking", "thinking": "let me think "},
        {"type": "toolCall", "id": "call_1", "name": "read_file", "arguments": {"path": "a.txt", "offset": 0}},
        {"type": "toolCall", "id": "call_2", "name": "terminal", "arguments": "not json {"},
    ]
    assert result["toolCallId"] == "call_1" and result["toolName"] == "read_file"
    assert result["isError"] is False
    assert image_result["toolCallId"] == "call_2", "a result naming the call by `id` is paired by `call_id`"
    assert image_result["content"][1] == {"type": "image", "data": PNG, "mimeType": "image/png"}


def test_reasoning_falls_back_to_hermes_own_copy():
    converted = to_openclaw({"role": "assistant", "content": "x", "reasoning": "internal"})
    assert converted["content"][0] == {"type": "thinking", "thinking": "internal"}


def test_without_the_carried_original_the_semantic_fields_come_back():
    tool_ids: dict[str, str] = {}
    converted = [to_openclaw(message, tool_ids) for message in HERMES_MESSAGES[3:5]]
    assistant, result = (from_openclaw({k: v for k, v in c.items() if k != HERMES_FIELD}) for c in converted)
    assert assistant["role"] == "assistant" and assistant["finish_reason"] == "tool_calls"
    assert assistant["reasoning"] == "let me think "
    assert [(c["id"], c["function"]["name"], c["function"]["arguments"]) for c in assistant["tool_calls"]] == [
        ("call_1", "read_file", '{"path": "a.txt", "offset": 0}'),
        ("call_2", "terminal", "not json {"),
    ]
    assert result == {"role": "tool", "tool_call_id": "call_1", "name": "read_file",
                      "tool_name": "read_file", "content": "contents of a.txt"}


@pytest.mark.parametrize("made, expected", [
    ({"role": "custom", "customType": "keep-recent", "display": False, "timestamp": 1,
      "content": [{"type": "text", "text": "[keep-recent: 4 left out]"}]},
     {"role": "user", "content": "[keep-recent: 4 left out]", NOTE_KEY: "keep-recent"}),
    ({"role": "compactionSummary", "summary": "earlier work", "tokensBefore": 900, "timestamp": 1},
     {"role": "user", "content": "earlier work", NOTE_KEY: "compactionSummary"}),
    ({"role": "branchSummary", "summary": "went left", "fromId": "e1"},
     {"role": "user", "content": "went left", NOTE_KEY: "branchSummary"}),
    ({"role": "bashExecution", "command": "ls", "output": "a", "exitCode": 2},
     {"role": "user", "content": "Ran `ls`\n```\na\n```\n\nCommand exited with code 2", NOTE_KEY: "bashExecution"}),
    ({"role": "user", "content": [{"type": "text", "text": "note"}], "timestamp": 3},
     {"role": "user", "content": "note"}),
    ({"role": "user", "content": [{"type": "text", "text": "see"}, {"type": "image", "data": PNG, "mimeType": "image/png"}]},
     {"role": "user", "content": [{"type": "text", "text": "see"},
                                  {"type": "image_url", "image_url": {"url": f"data:image/png;base64,{PNG}"}}]}),
    ({"role": "assistant", "content": [{"type": "thinking", "thinking": "t"}, {"type": "text", "text": "a"},
                                       {"type": "toolCall", "id": "c9", "name": "f", "arguments": {"k": 1}}],
      "stopReason": "toolUse", "api": "ctxbox", "provider": "ctxbox", "model": "ctxbox"},
     {"role": "assistant", "content": "a", "reasoning": "t", "finish_reason": "tool_calls",
      "tool_calls": [{"id": "c9", "call_id": "c9", "type": "function",
                      "function": {"name": "f", "arguments": '{"k": 1}'}}]}),
    ({"role": "toolResult", "toolCallId": "c9", "toolName": "f", "content": [{"type": "text", "text": "r"}],
      "isError": False},
     {"role": "tool", "tool_call_id": "c9", "name": "f", "tool_name": "f", "content": "r"}),
], ids=lambda value: str(value.get("role")) if isinstance(value, dict) else "")
def test_engine_made_messages_become_hermes_messages(made, expected):
    assert from_openclaw(made) == expected


@pytest.mark.parametrize("name", SESSIONS)
def test_recorded_sessions_convert_both_ways_with_the_same_engine_view(name):
    """Real OpenClaw sessions (tool-heavy, German and Chinese): rebuilt as
    Hermes messages and converted back, the engine sees the same text,
    thinking, tool calls and results."""
    count = 0
    for original in openclaw_messages(name):
        if original.get("role") not in ("user", "assistant", "toolResult"):
            continue
        back = to_openclaw(from_openclaw(copy.deepcopy(original)))
        assert _view(back) == _view(original), original
        count += 1
    assert count > 500


def _view(message: dict) -> tuple:
    """What the engine reads of a message (ctxbox's host view)."""
    content = message.get("content")
    blocks = [{"type": "text", "text": content}] if isinstance(content, str) else content or []
    seen = []
    for block in blocks:
        kind = block.get("type")
        if kind == "text" and block.get("text"):
            seen.append(("text", block["text"]))
        elif kind == "thinking" and block.get("thinking"):
            seen.append(("thinking", block["thinking"]))
        elif kind == "toolCall":
            seen.append(("call", block["id"], block["name"], json.dumps(block.get("arguments"), sort_keys=True)))
        elif kind == "image":
            seen.append(("image", block.get("mimeType")))
    texts = [item for item in seen if item[0] == "text"]
    others = [item for item in seen if item[0] != "text"]
    joined = ("text", "\n".join(text for _, text in texts)) if texts else None
    return message["role"], message.get("toolCallId"), joined, tuple(others)
