"""Errors that name what is at fault: the script, the kernel, the target."""

from __future__ import annotations

from tritonforge.errors import TritonforgeError


class PipelineError(TritonforgeError):
    """A build input or step is wrong; the message says which file/kernel/target and why."""

    def __init__(self, message: str, *, script: str | None = None, kernel: str | None = None,
                 target: str | None = None):
        self.script = script
        self.kernel = kernel
        self.target = target
        self.detail = message
        where = []
        if script:
            where.append(str(script))
        if kernel:
            where.append(f"kernel '{kernel}'")
        if target:
            where.append(f"target {target}")
        super().__init__(f"{': '.join(where)}: {message}" if where else message)
