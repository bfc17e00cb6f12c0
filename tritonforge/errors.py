"""The one base of every error tritonforge raises on purpose: its message names the file, kernel, node or
object at fault, so the tasks print it as one line (exit 1) instead of a traceback. Each module keeps its
own subclass, and the built-in class callers already catch (ValueError, RuntimeError, ...)."""


class TritonforgeError(Exception):
    pass
