"""The one Triton pin (pins/triton.txt) and the check that the running Triton matches it."""

from __future__ import annotations

import re
from pathlib import Path

from tritonforge.pipeline.errors import PipelineError

from tritonforge import pins_dir

# pins/triton.txt of the checkout, or the copy an installed package carries (tritonforge.pins_dir; the
# compile images' too). A build with another release says so with the `triton` setting, never by
# another pin file.
PIN_FILE = Path(pins_dir()) / "triton.txt"


def pinned_version(pin_file: Path = PIN_FILE) -> str:
    try:
        text = pin_file.read_text()
    except OSError as exc:
        raise PipelineError(f"cannot read the Triton pin {pin_file}: {exc.strerror}") from None
    for line in text.splitlines():
        line = line.split("#", 1)[0].strip()
        m = re.fullmatch(r"triton\s*==\s*([\w.+-]+)", line)
        if m:
            return m.group(1)
    raise PipelineError(f"{pin_file}: no 'triton==X.Y.Z' line")


def pin_at_revision(rev: str, root: Path | None = None) -> str:
    """The pinned version in pins/triton.txt at git revision `rev` (a pull request's base)."""
    import subprocess
    import tempfile

    root = root or PIN_FILE.parent.parent
    proc = subprocess.run(["git", "show", f"{rev}:pins/triton.txt"], cwd=root, capture_output=True, text=True)
    if proc.returncode:
        raise PipelineError(f"no pins/triton.txt at {rev}: {proc.stderr.strip()}")
    with tempfile.TemporaryDirectory() as tmp:
        pin = Path(tmp) / "triton.txt"
        pin.write_text(proc.stdout)
        return pinned_version(pin)


# The Triton releases the compiler supports (pipeline/compile/triton_api.py keeps their differences): the
# pin, or another one of these through the `triton` setting (invoke.yaml, `--triton`).
OLDEST, NEWEST = "3.5.0", "3.9.0"


def check_supported(version: str) -> str:
    """`version` when the compiler supports it, else a PipelineError that names the range."""
    if not re.fullmatch(r"\d+\.\d+\.\d+", version or ""):
        raise PipelineError(f"triton {version!r}: expected a release such as {NEWEST}")
    def key(v: str) -> tuple[int, ...]:
        return tuple(map(int, v.split(".")))

    if not key(OLDEST) <= key(version) <= key(NEWEST):
        raise PipelineError(f"triton {version} is not supported: choose a release from {OLDEST} to {NEWEST}")
    return version


def installed_version() -> str:
    import triton

    return triton.__version__


def check_pin(allow_unpinned: bool = False, triton: str | None = None) -> str:
    """Return the running Triton version; refuse one that is not the pinned one (or `triton`, the setting
    that builds with another supported release) unless allowed."""
    want, have = (check_supported(triton) if triton else pinned_version()), installed_version()
    if have != want and not allow_unpinned:
        where = "the triton setting asks for" if triton else f"{PIN_FILE.name} pins"
        raise PipelineError(
            f"running triton {have}, but {where} {want}; install it (pip install triton=={want}) "
            f"or pass --allow-unpinned-triton to build anyway")
    return have
