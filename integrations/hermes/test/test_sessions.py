"""What the plugin tells the sidecar of a session as Hermes's transcript
changes (`sessions.Session`): a transcript that continues the last grows the
history; a projection of a state already sent (an older transcript, one with
a message Hermes edited in place) adds only its unknown tail and never
shrinks the history; only a rewind or another conversation cuts it back,
and that sync is marked `reset`."""

from __future__ import annotations

from ctxbox_hermes.messages import NOTE_KEY, from_openclaw
from ctxbox_hermes.sessions import Session

GENERATION = 1


def turn(number: int) -> list[dict]:
    return [{"role": "user", "content": f"question {number}"},
            {"role": "assistant", "content": f"answer {number}"}]


def turns(first: int, last: int) -> list[dict]:
    return [message for number in range(first, last + 1) for message in turn(number)]


def synced_session(messages: list[dict]) -> Session:
    """A session whose sidecar holds `messages`."""
    session = Session()
    session.absorb(messages)
    session.synced(GENERATION)
    return session


def contents(messages: list[dict]) -> list[str]:
    return [str(from_openclaw(message)["content"]) for message in messages]


def test_a_continuation_sends_only_the_new_messages():
    session = synced_session(turns(1, 3))
    assert session.absorb(turns(1, 4)) == 6
    sync = session.sync_for(GENERATION)
    assert sync["base"] == 6 and contents(sync["messages"]) == ["question 4", "answer 4"]
    assert "reset" not in sync and session.resets == 0


def test_a_compressed_transcript_is_continued_and_the_history_keeps_everything():
    session = synced_session(turns(1, 6))
    note = {"role": "user", "content": "[summary of turns 1-4]", NOTE_KEY: "summary"}
    shown = [note] + turns(5, 6)
    session.show(shown)
    session.absorb(shown + turn(7))
    assert len(session.wire) == 14, "the history holds every turn, not Hermes's shorter transcript"
    assert session.sync_for(GENERATION)["base"] == 12


def test_an_older_transcript_than_the_last_shown_is_a_projection_and_shrinks_nothing():
    # Hermes compressed (the plugin showed it a note and turns 5-6), then
    # calls again with the transcript it had before: a retry.
    session = synced_session(turns(1, 6))
    session.show([{"role": "user", "content": "[note]", NOTE_KEY: "note"}] + turns(5, 6))
    assert session.absorb(turns(1, 6)) == 12
    assert len(session.wire) == 12
    sync = session.sync_for(GENERATION)
    assert sync["base"] == 12 and sync["messages"] == [] and "reset" not in sync
    assert session.resets == 0


def test_a_message_edited_in_place_is_not_a_new_message_nor_a_reset():
    session = synced_session(turns(1, 4))
    session.show(turns(1, 4))
    edited = turns(1, 4)
    edited[2] = {**edited[2], "timestamp": 12345}  # Hermes stamped a message it holds
    session.absorb(edited + turn(5))
    assert contents(session.wire)[-3:] == ["answer 4", "question 5", "answer 5"] and len(session.wire) == 10
    sync = session.sync_for(GENERATION)
    assert sync["base"] == 8 and "reset" not in sync and session.resets == 0


def test_notes_the_plugin_showed_are_never_taken_for_new_messages():
    session = synced_session(turns(1, 6))
    note = {"role": "user", "content": "[note]", NOTE_KEY: "note"}
    session.show([note] + turns(4, 6))
    # Hermes puts its own message after the note (not a continuation) and goes on.
    todo = {"role": "user", "content": "todo list", "_todo_snapshot_synthetic": True}
    session.absorb([note, todo] + turns(4, 6) + turn(7))
    assert contents(session.wire)[-2:] == ["question 7", "answer 7"] and len(session.wire) == 14
    assert session.resets == 0


def test_a_rewind_cuts_the_history_back_and_the_sync_says_reset():
    session = synced_session(turns(1, 5))
    session.absorb(turns(1, 3) + [{"role": "user", "content": "question 4, asked again differently"}])
    assert contents(session.wire)[-2:] == ["answer 3", "question 4, asked again differently"]
    assert len(session.wire) == 7 and session.resets == 1
    sync = session.sync_for(GENERATION)
    assert sync["reset"] is True and sync["base"] == 6, "only what Hermes's branch no longer holds is replaced"
    assert contents(sync["messages"]) == ["question 4, asked again differently"]
    session.synced(GENERATION)
    assert "reset" not in session.sync_for(GENERATION), "said once"


def test_another_conversation_under_the_same_id_replaces_it_with_a_reset():
    session = synced_session(turns(1, 3))
    session.absorb([{"role": "user", "content": "something else entirely"}])
    sync = session.sync_for(GENERATION)
    assert sync["reset"] is True and sync["base"] == 0 and len(sync["messages"]) == 1


def test_a_restarted_sidecar_gets_the_whole_history_without_a_reset():
    session = synced_session(turns(1, 3))
    session.absorb(turns(1, 4))
    sync = session.sync_for(GENERATION + 1)
    assert sync["base"] == 0 and len(sync["messages"]) == 8 and "reset" not in sync
    assert session.needs_sync(GENERATION + 1)
    session.synced(GENERATION + 1)
    assert not session.needs_sync(GENERATION + 1)
