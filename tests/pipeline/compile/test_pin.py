"""The one Triton pin: a build under another triton is refused unless asked for."""

from __future__ import annotations


def test_pin_is_enforced(monkeypatch, tmp_path):
    import pytest
    from tritonforge.pipeline.compile import pin
    from tritonforge.pipeline.errors import PipelineError

    assert pin.pinned_version() == "3.5.0"
    monkeypatch.setattr(pin, "installed_version", lambda: "9.9.9")
    with pytest.raises(PipelineError, match="pins 3.5.0.*--allow-unpinned-triton"):
        pin.check_pin()
    assert pin.check_pin(allow_unpinned=True) == "9.9.9"
