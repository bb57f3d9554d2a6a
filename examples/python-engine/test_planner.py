"""Native tests of the plan (plain CPython, no componentize-py needed):
`python3 test_planner.py`. The same cases as the Rust
engine's unit tests in `example-engines/keep-recent/src/lib.rs`."""

import os
import sys
import unittest

sys.dont_write_bytecode = True  # keep src/ clean: the component is built from it
sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "src"))

from planner import NOTE_TOKENS, plan  # noqa: E402


class Rows:
    """A history of (kind, tokens, call) rows; `call` is the index of the
    assistant message a tool result answers, else None."""

    def __init__(self, rows):
        self.rows = rows

    def len(self):
        return len(self.rows)

    def tokens(self, start, end):
        end = min(end, len(self.rows))
        start = min(start, end)
        return sum(row[1] for row in self.rows[start:end])

    def is_compaction_summary(self, index):
        return index < len(self.rows) and self.rows[index][0] == "summary"

    def tool_result_call(self, index):
        if index < len(self.rows) and self.rows[index][0] == "result":
            return self.rows[index][2]
        return None


def user(tokens):
    return ("user", tokens, None)


def kept(items):
    return [(item[1], item[2]) for item in items if item[0] == "keep"]


def has_note(items):
    return any(item[0] == "note" for item in items)


class PlanTests(unittest.TestCase):
    def test_keeps_everything_within_budget(self):
        history = Rows([user(10), user(20)])
        items, estimated = plan(history, 100)
        self.assertEqual(kept(items), [(0, 2)])
        self.assertEqual(estimated, 30)
        self.assertFalse(has_note(items))
        self.assertEqual(kept(plan(history, None)[0]), [(0, 2)])

    def test_empty_history(self):
        items, estimated = plan(Rows([]), 0)
        self.assertEqual(kept(items), [(0, 0)])
        self.assertEqual(estimated, 0)

    def test_keeps_the_newest_suffix_that_fits_with_a_note(self):
        history = Rows([user(100)] * 4)
        items, estimated = plan(history, 250 + NOTE_TOKENS)
        self.assertEqual(kept(items), [(2, 4)])
        self.assertTrue(has_note(items))
        self.assertEqual(estimated, 200 + NOTE_TOKENS)
        note = next(item[1] for item in items if item[0] == "note")
        self.assertIn("2 earlier messages (about 200 tokens)", note)

    def test_never_opens_with_a_result_whose_call_was_cut(self):
        history = Rows([
            user(10),
            ("assistant", 100, None),
            ("result", 10, 1),
            ("result", 10, 1),
            user(10),
        ])
        # 30 tokens fit entries 2..5, but 2 and 3 answer the call at 1.
        items, _ = plan(history, 30 + NOTE_TOKENS)
        self.assertEqual(kept(items), [(4, 5)])

    def test_keeps_the_newest_pair_whole_when_nothing_else_fits(self):
        history = Rows([user(10), ("assistant", 500, None), ("result", 500, 1)])
        self.assertEqual(kept(plan(history, 100)[0]), [(1, 3)])

    def test_keeps_the_newest_message_even_when_it_alone_is_too_big(self):
        history = Rows([user(10), user(1000)])
        self.assertEqual(kept(plan(history, 0)[0]), [(1, 2)])

    def test_pins_a_leading_compaction_summary(self):
        history = Rows([("summary", 50, None), user(100), user(100), user(100)])
        items, _ = plan(history, 50 + NOTE_TOKENS + 200)
        self.assertEqual(kept(items), [(0, 1), (2, 4)])


if __name__ == "__main__":
    unittest.main()
