"""The keep-recent plan, independent of the generated bindings.

A line-for-line port of `plan` in `example-engines/keep-recent/src/lib.rs`:
the prompt is the longest suffix of the history whose host-side token
estimate fits the budget, never starting on a tool result whose call was
left out, preceded by a one-line note saying how much was omitted. A
compaction summary at the head of the history is kept too when it takes at
most half the budget.

`history` is anything with the methods of the WIT `history` resource that
the plan uses: `len()`, `tokens(start, end)`, `is_compaction_summary(i)`
and `tool_result_call(i)`. The component wraps the host's resource
(`keep_recent_py.HostHistory`); the unit tests use a plain list, so this
module runs under any CPython without componentize-py.

The plan is a list of `("keep", start, end)` and `("note", text)` items plus
the estimated tokens; the component turns them into `assembled-item`s.
"""

ENGINE_ID = "keep-recent-py"

# Tokens set aside for the omission note (the Rust engine's NOTE_TOKENS).
NOTE_TOKENS = 48


def plan(history, token_budget):
    """Chooses the prompt: returns (items, estimated_tokens)."""
    length = history.len()
    all_tokens = history.tokens(0, length)
    if token_budget is None or all_tokens <= token_budget:
        return [("keep", 0, length)], all_tokens
    budget = token_budget

    pinned_end = _pinned_summary_end(history, budget)
    pinned_tokens = history.tokens(0, pinned_end)
    available = max(0, budget - (NOTE_TOKENS + pinned_tokens))
    start = _pair_safe_start(history, _fitting_suffix_start(history, pinned_end, available))

    omitted = start - pinned_end
    kept_tokens = history.tokens(start, length)
    items = []
    if pinned_end > 0:
        items.append(("keep", 0, pinned_end))
    estimated_tokens = pinned_tokens + kept_tokens
    if omitted > 0:
        omitted_tokens = history.tokens(pinned_end, start)
        items.append((
            "note",
            f"[{ENGINE_ID}: {omitted} earlier messages (about {omitted_tokens} tokens) "
            "were left out to fit the context window.]",
        ))
        estimated_tokens += NOTE_TOKENS
    if start < length:
        items.append(("keep", start, length))
    return items, estimated_tokens


def _pinned_summary_end(history, budget):
    """1 if the history opens with a compaction summary worth at most half the
    budget, else 0."""
    if history.is_compaction_summary(0) and history.tokens(0, 1) <= budget // 2:
        return 1
    return 0


def _fitting_suffix_start(history, floor, available):
    """The smallest start in floor..len whose suffix fits `available` tokens;
    len - 1 (the newest entry alone) when nothing fits, because an empty prompt
    is never more useful than an oversized one."""
    length = history.len()
    # Suffix token counts shrink as the start grows: binary search.
    low, high = floor, length
    while low < high:
        mid = low + (high - low) // 2
        if history.tokens(mid, length) <= available:
            high = mid
        else:
            low = mid + 1
    if low == length and length > floor:
        return length - 1
    return low


def _pair_safe_start(history, start):
    """Moves `start` so the kept suffix does not open with a tool result whose
    call is left out: past such results, or, when they are the newest entries,
    back to their call (the pair is kept whole rather than dropped)."""
    length = history.len()
    position = start
    while position < length:
        call = history.tool_result_call(position)
        if call is not None and call < start:
            position += 1
        else:
            return position
    # Only orphaned results were left: keep the newest call with its results.
    call = history.tool_result_call(start)
    return call if call is not None else start
