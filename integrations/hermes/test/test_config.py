"""The `ctxbox:` section of config.yaml: defaults, and errors that name the key."""

from __future__ import annotations

import os

import pytest

from ctxbox_hermes.config import ConfigError, read_settings
from ctxbox_hermes.install import find_binary


def test_defaults_and_paths():
    settings = read_settings({"engine": "keep-recent"})
    assert settings.ctxbox_bin == find_binary(None), "beside Python, else looked up on PATH"
    assert settings.data_dir == os.path.expanduser("~/.local/share/ctxbox")
    assert (settings.call_timeout_ms, settings.window_tokens, settings.threshold, settings.target) == (
        15_000, None, 0.75, 0.5)
    wasm = read_settings({"engine": "engines/mine.wasm", "ctxbox_bin": "~/bin/ctxbox", "config_file": "c.toml"})
    assert wasm.engine == os.path.abspath("engines/mine.wasm")
    assert wasm.ctxbox_bin == os.path.expanduser("~/bin/ctxbox")
    assert wasm.config_file == os.path.abspath("c.toml")


@pytest.mark.parametrize("raw, named", [
    (None, "ctxbox.engine is required"),
    ({}, "ctxbox.engine is required"),
    ({"engine": ""}, "ctxbox.engine must be a non-empty string"),
    ({"engine": "keep-recent", "window": 8000}, "ctxbox.window is not a setting"),
    ({"engine": "keep-recent", "call_timeout_ms": 50}, "ctxbox.call_timeout_ms"),
    ({"engine": "keep-recent", "call_timeout_ms": "15s"}, "ctxbox.call_timeout_ms"),
    ({"engine": "keep-recent", "window_tokens": 100}, "ctxbox.window_tokens"),
    ({"engine": "keep-recent", "threshold": 1.5}, "ctxbox.threshold"),
    ({"engine": "keep-recent", "threshold": 0.5, "target": 0.6}, "ctxbox.target"),
    ({"engine": "keep-recent", "data_dir": 3}, "ctxbox.data_dir must be a non-empty string"),
    (["keep-recent"], "ctxbox: must be a mapping"),
])
def test_a_mistake_names_the_key(raw, named):
    with pytest.raises(ConfigError, match=named):
        read_settings(raw)
