"""Messages for the person at the terminal. Hermes sends its loggers to
`~/.hermes/logs/agent.log`, where a newcomer never looks; a setup problem
(a bad `ctxbox:` setting, an unknown engine, a missing or mismatched
binary) is also printed on stderr, which Hermes's CLI leaves on the console,
once per process however often it happens."""

from __future__ import annotations

import logging
import sys
import threading

logger = logging.getLogger("ctxbox_hermes")

_said: set[str] = set()
_lock = threading.Lock()


def say_once(text: str) -> bool:
    """Prints `ctxbox: <text>` on stderr and logs it as a warning, unless
    this process has said it already. Returns whether it was said now."""
    with _lock:
        if text in _said:
            return False
        _said.add(text)
    logger.warning("%s", text)
    try:
        print(f"ctxbox: {text}", file=sys.stderr, flush=True)
    except (OSError, ValueError):
        pass
    return True
