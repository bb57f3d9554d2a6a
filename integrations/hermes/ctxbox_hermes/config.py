"""The plugin's configuration: the `ctxbox:` section of Hermes's
config.yaml, checked, with its defaults. A mistake names the key."""

from __future__ import annotations

import os
from dataclasses import dataclass
from typing import Any, Optional

from .install import find_binary

DEFAULT_CALL_TIMEOUT_MS = 15_000
"""Above the sandbox's default 10 s call deadline, so a hanging engine is
answered by ctxbox's guard (and quarantined) before the plugin gives up."""


class ConfigError(ValueError):
    """A bad `ctxbox:` setting."""


@dataclass(frozen=True)
class Settings:
    """The checked configuration."""

    engine: str
    """A bundled engine (`keep-recent`, `lossless`, `delegating`) or a `.wasm` path."""
    ctxbox_bin: str = "ctxbox"
    """The binary: the setting, else the one the `ctxbox-bin` wheel installed
    beside Hermes's Python, else `ctxbox` on PATH (`install.find_binary`)."""
    data_dir: str = os.path.join("~", ".local", "share", "ctxbox")
    config_file: Optional[str] = None
    """A ctxbox.toml for the sidecar (sandbox limits, quarantine back-off)."""
    call_timeout_ms: int = DEFAULT_CALL_TIMEOUT_MS
    """The longest any method may wait for the sidecar."""
    window_tokens: Optional[int] = None
    """The window compression works in; the model's context length when unset.
    May be below Hermes's 64K floor, which only bounds the model's window."""
    threshold: float = 0.75
    """Compress once a prompt reaches this share of the window."""
    target: float = 0.5
    """The share of the window the engine assembles the compressed transcript into."""

    @property
    def call_timeout_s(self) -> float:
        return self.call_timeout_ms / 1000


def read_settings(raw: Any) -> Settings:
    """`raw` (the `ctxbox:` mapping) checked; raises `ConfigError`."""
    if raw is None:
        raw = {}
    if not isinstance(raw, dict):
        raise ConfigError("ctxbox: must be a mapping (see integrations/hermes/README.md)")
    known = set(Settings.__dataclass_fields__)
    unknown = sorted(set(raw) - known)
    if unknown:
        raise ConfigError(f"ctxbox.{unknown[0]} is not a setting (expected one of {', '.join(sorted(known))})")
    engine = _text(raw, "engine")
    if engine is None:
        raise ConfigError('ctxbox.engine is required (e.g. "keep-recent" or the path of a .wasm engine)')
    if engine.endswith(".wasm"):
        engine = _path(engine)
    timeout = raw.get("call_timeout_ms", DEFAULT_CALL_TIMEOUT_MS)
    if not _is_number(timeout) or timeout < 100:
        raise ConfigError("ctxbox.call_timeout_ms must be a number of milliseconds >= 100")
    window = raw.get("window_tokens")
    if window is not None and (not _is_number(window) or window < 256):
        raise ConfigError("ctxbox.window_tokens must be a number of tokens >= 256")
    threshold = raw.get("threshold", 0.75)
    if not _is_number(threshold) or not 0 < threshold <= 1:
        raise ConfigError("ctxbox.threshold must be a share of the window, above 0 and at most 1")
    target = raw.get("target", 0.5)
    if not _is_number(target) or not 0 < target < threshold:
        raise ConfigError("ctxbox.target must be a share of the window above 0 and below ctxbox.threshold")
    binary = find_binary(_text(raw, "ctxbox_bin"))
    config_file = _text(raw, "config_file")
    return Settings(
        engine=engine,
        ctxbox_bin=_path(binary) if os.sep in binary or binary.startswith("~") else binary,
        data_dir=_path(_text(raw, "data_dir") or Settings.data_dir),
        config_file=_path(config_file) if config_file else None,
        call_timeout_ms=int(timeout),
        window_tokens=int(window) if window is not None else None,
        threshold=float(threshold),
        target=float(target),
    )


def _text(raw: dict, key: str) -> Optional[str]:
    value = raw.get(key)
    if value is None:
        return None
    if not isinstance(value, str) or not value.strip():
        raise ConfigError(f"ctxbox.{key} must be a non-empty string")
    return value


def _path(value: str) -> str:
    return os.path.abspath(os.path.expanduser(value))


def _is_number(value: Any) -> bool:
    return isinstance(value, (int, float)) and not isinstance(value, bool)
