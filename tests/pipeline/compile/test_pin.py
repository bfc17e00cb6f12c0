"""The one Triton pin: a build under another triton is refused unless asked for; the `triton` setting names
another supported release."""

from __future__ import annotations

import pytest
from tritonforge.pipeline.compile import pin
from tritonforge.pipeline.errors import PipelineError


def test_pin_is_enforced(monkeypatch):
    assert pin.pinned_version() == pin.NEWEST == "3.9.0"
    monkeypatch.setattr(pin, "installed_version", lambda: "9.9.9")
    with pytest.raises(PipelineError, match="pins 3.9.0.*--allow-unpinned-triton"):
        pin.check_pin()
    assert pin.check_pin(allow_unpinned=True) == "9.9.9"


def test_the_triton_setting_names_another_supported_release(monkeypatch):
    monkeypatch.setattr(pin, "installed_version", lambda: "3.5.0")
    assert pin.check_pin(triton="3.5.0") == "3.5.0"
    with pytest.raises(PipelineError, match="the triton setting asks for 3.7.1"):
        pin.check_pin(triton="3.7.1")
    for bad, why in (("3.4.0", "not supported: choose a release from 3.5.0 to 3.9.0"),
                     ("4.0.0", "not supported"), ("latest", "expected a release such as 3.9.0")):
        with pytest.raises(PipelineError, match=why):
            pin.check_supported(bad)
