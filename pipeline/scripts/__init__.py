"""Reading kernel scripts: their function tables (loaded as ORT's compile_triton.py loads them),
the parameter ABI each entry declares, its launch contract, and the profiles that pick a build's kernels."""
