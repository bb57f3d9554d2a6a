"""Hermes's own compression (its `ContextCompressor`, as `context.engine:
compressor` would build it from config.yaml's `compression:` section and
the model Hermes told the engine about), in the two places the plugin
needs it:

* `instead`: when ctxbox cannot answer (the sidecar down or slow, the
  engine quarantined and its call answered by ctxbox's `legacy`), the
  compression is what Hermes alone would make of it: compressed by Hermes's
  compressor if that compressor's own threshold is reached or the user
  asked (`/compress`), otherwise left as it is, as `legacy` leaves it. So
  the plugin's smaller window never costs summary calls Hermes alone would
  not make, and a real overflow is still compressed.
* `within`: an engine that does not own compaction leaves it to its host
  (OpenClaw's plugin runs OpenClaw's compaction then). When such an
  engine's prompt is over the budget, Hermes's compressor, sized to the
  plugin's window, compresses it.
"""

from __future__ import annotations

import logging
from typing import Any, Optional

from agent.context_compressor import ContextCompressor
from agent.model_metadata import estimate_messages_tokens_rough

logger = logging.getLogger(__name__)


class HermesCompressor:
    """Hermes's compressors for one agent, built on first use; they follow
    model switches."""

    def __init__(self, compression: dict) -> None:
        self._compression = compression if isinstance(compression, dict) else {}
        self.runtime: dict[str, Any] = {}
        """What `update_model` said: the model, its window and endpoint."""
        self._alone: Optional[ContextCompressor] = None
        self._windowed: Optional[tuple[int, ContextCompressor]] = None
        self.last: Optional[ContextCompressor] = None
        """The compressor that ran last (Hermes reads its outcome flags)."""

    def update_model(self, **runtime: Any) -> None:
        """Follows Hermes's `update_model`."""
        self.runtime = runtime
        self._windowed = None  # rebuilt for the new model on next use
        if self._alone is not None:
            self._alone.update_model(**runtime)

    def for_another_agent(self) -> "HermesCompressor":
        """A copy for another agent: same settings, compressors of its own."""
        copied = HermesCompressor(self._compression)
        copied.runtime = dict(self.runtime)
        return copied

    def instead(self, messages: list[dict], current_tokens: Optional[int], force: bool,
                **kwargs: Any) -> list[dict]:
        """What Hermes alone would make of `messages` (`kwargs`: the rest of
        `compress`'s arguments)."""
        def run() -> list[dict]:
            if self._alone is None:
                self._alone = self._build(self.runtime.get("context_length"))
            tokens = current_tokens if current_tokens and current_tokens > 0 else None
            if not force and not self._alone.should_compress(tokens or estimate_messages_tokens_rough(messages)):
                return messages
            self.last = self._alone
            return self._alone.compress(messages, current_tokens=current_tokens, force=force, **kwargs)
        return self._safely(run, messages)

    def within(self, window: int, messages: list[dict], **kwargs: Any) -> list[dict]:
        """`messages` compressed by Hermes's compressor sized to `window`."""
        def run() -> list[dict]:
            if self._windowed is None or self._windowed[0] != window:
                self._windowed = (window, self._build(window))
            self.last = self._windowed[1]
            return self.last.compress(messages, force=True, **kwargs)
        return self._safely(run, messages)

    def _safely(self, run, messages: list[dict]) -> list[dict]:
        """`run()`, or `messages` unchanged if it fails: Hermes then sees no
        progress and carries on (an exception would lose the turn)."""
        self.last = None
        try:
            return run()
        except Exception:
            logger.warning("Hermes's compressor failed; the messages stay as they are", exc_info=True)
            return messages

    def _build(self, context_length: Optional[int]) -> ContextCompressor:
        config = self._compression
        model = self.runtime
        return ContextCompressor(
            model=model.get("model", ""),
            threshold_percent=float(config.get("threshold", 0.50)),
            protect_first_n=max(0, int(config.get("protect_first_n", 3))),
            protect_last_n=int(config.get("protect_last_n", 20)),
            summary_target_ratio=float(config.get("target_ratio", 0.20)),
            quiet_mode=True,
            base_url=model.get("base_url", ""),
            api_key=model.get("api_key", ""),
            config_context_length=context_length or None,
            provider=model.get("provider", ""),
            api_mode=model.get("api_mode", ""),
            abort_on_summary_failure=str(config.get("abort_on_summary_failure", False)).lower()
            in {"true", "1", "yes"},
        )
