"""The base of the custom-op library's errors: the project's TritonforgeError (one line, exit 1 in every
task), or, where this package ships alone as the `tritonforge_ort` wheel, a class of the same name."""

try:
    from tritonforge.errors import TritonforgeError
except ImportError:  # the tritonforge_ort wheel, without the project

    class TritonforgeError(Exception):
        pass

__all__ = ["TritonforgeError"]
