"""Kernel registry like ORT's: metadata in table order, lookup by name, list by group.

Unlike ORT (which loads once per process and breaks with a second GPU) modules are loaded once per
CUDA context, lazily, so each device gets functions that belong to it.
"""

from __future__ import annotations

from .artifacts import Artifacts, KernelInfo
from .launch import PreparedLaunch, Unsupported

DEFAULT_SHARED_LIMIT = 48 * 1024
PORTABLE_CLUSTER = 8  # programs in a thread-block cluster that every sm_90+ device can launch
MAX_CLUSTER = 16  # the most any device launches (H100, H200), once the function allows non-portable sizes


class LoadedKernel:
    """One kernel loaded in one context."""

    def __init__(self, info: KernelInfo, backend, image: bytes):
        self.info = info
        self.backend = backend
        self.module = backend.load_module(image, info.name)
        self.function = backend.get_function(self.module, info.func_name, info.name)
        self.attributes = backend.function_attributes(self.function)
        self._dynamic_shared_set = False
        self._scratch: dict[str, tuple[int, int]] = {}  # name -> (ptr, bytes)
        self._resident: int | None = None
        self._clusters: dict[tuple, int] = {}  # cluster shape -> how many the device runs at once
        self._non_portable = False  # clusters over 8 programs allowed on this function

    @property
    def resident(self) -> int:
        """Programs of this kernel the device holds at once (the most a cooperative grid may have)."""
        if self._resident is None:
            self._ensure_dynamic_shared()
            self._resident = self.backend.resident_blocks(self.function, self.info.threads_per_block,
                                                          self.info.shared, self.info.name)
        return self._resident

    def check(self, grid) -> None:
        """Raise Unsupported when this device cannot run the kernel with this grid."""
        info, limits = self.info, self.backend.limits
        threads = info.threads_per_block
        max_threads = min(limits["max_threads_per_block"], self.attributes["max_threads_per_block"])
        if threads > max_threads:
            raise Unsupported(f"{info.name}: {threads} threads per block, the device/function allows {max_threads}")
        total_shared = info.shared + self.attributes["static_shared"]
        if total_shared > limits["max_shared_optin"]:
            raise Unsupported(f"{info.name}: needs {total_shared} B of shared memory, the device has "
                              f"{limits['max_shared_optin']}")
        for axis, (g, m) in enumerate(zip(grid, limits["max_grid"])):
            if not 1 <= g <= m:
                raise Unsupported(f"{info.name}: grid[{axis}]={g} outside 1..{m}")

    def _ensure_dynamic_shared(self) -> None:
        if self.info.shared > DEFAULT_SHARED_LIMIT and not self._dynamic_shared_set:
            self.backend.set_max_dynamic_shared(self.function, self.info.shared, self.info.name)
            self._dynamic_shared_set = True

    def _scratch_ptr(self, hidden: dict, programs: int) -> int:
        size = hidden.get("scratch_size", 0)
        if not size:
            return 0  # Triton passes NULL when the kernel needs no scratch
        need = programs * size + hidden.get("scratch_align", 1)
        ptr, have = self._scratch.get(hidden["name"], (0, 0))
        if have < need:
            if ptr:
                self.backend.free(ptr)
            ptr = self.backend.alloc(need)
            self._scratch[hidden["name"]] = (ptr, need)
        align = max(1, hidden.get("scratch_align", 1))
        return (ptr + align - 1) // align * align

    def check_cluster(self, grid, cluster) -> None:
        """Raise Unsupported when this device cannot launch `grid` in clusters of `cluster` programs."""
        name = self.info.name
        if not self.backend.limits.get("clusters", False):
            raise Unsupported(f"{name}: launched in thread-block clusters, which this device does not have")
        if any(d < 1 or g % d for g, d in zip(grid, cluster)):
            raise Unsupported(f"{name}: clusters of {cluster} do not divide the grid {grid}")
        size = cluster[0] * cluster[1] * cluster[2]
        if size > MAX_CLUSTER:
            raise Unsupported(f"{name}: clusters of {cluster} exceed the {MAX_CLUSTER} programs any device launches")
        if cluster not in self._clusters:
            self._ensure_dynamic_shared()
            try:
                if size > PORTABLE_CLUSTER and not self._non_portable:
                    self.backend.allow_non_portable_clusters(self.function, name)
                    self._non_portable = True
                self._clusters[cluster] = self.backend.resident_clusters(
                    self.function, self.info.threads_per_block, self.info.shared, cluster, name)
            except RuntimeError as why:  # the driver refuses the size (over 8 is not portable)
                raise Unsupported(f"{name}: this device cannot launch clusters of {cluster} ({why})") from None
        if not self._clusters[cluster]:
            raise Unsupported(f"{name}: a cluster of {cluster} programs does not fit on this device at once")

    def prepare(self, values: dict, grid, cooperative: bool = False, cluster=None) -> PreparedLaunch:
        """Pack arguments by parameter name; raises Unsupported instead of launching what cannot run."""
        grid = tuple(int(g) for g in grid)
        self.check(grid)
        if cooperative and grid[0] * grid[1] * grid[2] > self.resident:
            raise Unsupported(f"{self.info.name}: a cooperative grid of {grid} exceeds the {self.resident} "
                              "programs the device holds at once")
        if cluster is not None:
            cluster = tuple(int(d) for d in cluster)
            self.check_cluster(grid, cluster)
        for p in self.info.params:
            div = p.get("divisibility", 1)
            if div > 1 and int(values[p["name"]]) % div:
                raise Unsupported(f"{self.info.name}: {p['name']}={values[p['name']]} is not a multiple of {div}")
        self._ensure_dynamic_shared()
        programs = grid[0] * grid[1] * grid[2]
        hidden = {h["name"]: self._scratch_ptr(h, programs) for h in self.info.hidden_params}
        return PreparedLaunch(self, values, grid, hidden, cooperative, cluster)

    def launch(self, values: dict, grid, stream: int = 0) -> None:
        self.prepare(values, grid)(stream)


class Registry:
    def __init__(self, artifacts: Artifacts, backend):
        if artifacts.backend != backend.name:
            raise ValueError(f"{artifacts.path}: {artifacts.backend} artifacts, but the backend is {backend.name}")
        if backend.name == "cuda" and not artifacts.runs_on(backend.arch):
            raise ValueError(f"{artifacts.path}: built for {', '.join(artifacts.archs)}, but the device is "
                             f"sm_{backend.arch}")
        self.artifacts = artifacts
        self.backend = backend
        self.by_name = {k.name: k for k in artifacts.kernels}
        self.by_group = artifacts.groups()
        self._loaded: dict[tuple[int, str], LoadedKernel] = {}
        self._workspaces: dict[int, list[tuple[int, int]]] = {}  # context -> [(ptr, bytes)], newest last

    @property
    def metadata(self) -> list[KernelInfo]:
        return self.artifacts.kernels

    def kernel(self, name: str) -> LoadedKernel:
        """The kernel loaded in the current context (loaded on first use there)."""
        key = (self.backend.context_key(), name)
        k = self._loaded.get(key)
        if k is None:
            info = self.by_name.get(name)
            if info is None:
                raise KeyError(f"no kernel named {name!r} in {self.artifacts.path}")
            k = LoadedKernel(info, self.backend, self.artifacts.blobs[name])
            self._loaded[key] = k
        return k

    def workspace(self, nbytes: int) -> int:
        """A zeroed buffer of at least `nbytes` in the current context, for kernels whose contract asks
        for one. Kernels leave it zeroed, so launches on one stream share it; outgrown buffers are
        kept, since prepared launches may still point at them. Launches that may run at the same time
        (several streams) need one registry each."""
        bufs = self._workspaces.setdefault(self.backend.context_key(), [])
        if not bufs or bufs[-1][1] < nbytes:
            size = max(nbytes, 2 * bufs[-1][1] if bufs else 1 << 16)
            ptr = self.backend.alloc(size)
            self.backend.memset(ptr, 0, size)
            bufs.append((ptr, size))
        return bufs[-1][0]

    def workspace_nonzero_bytes(self) -> int:
        """Bytes that are not zero in this context's workspaces (after a synchronize, 0 if every
        kernel kept its promise to leave the workspace zeroed)."""
        import numpy as np

        total = 0
        for ptr, size in self._workspaces.get(self.backend.context_key(), []):
            host = np.empty(size, np.uint8)
            self.backend.copy_dtoh(host.ctypes.data, ptr, size)
            total += int(np.count_nonzero(host))
        return total

    def group(self, group: str) -> list[LoadedKernel]:
        return [self.kernel(k.name) for k in self.by_group.get(group, [])]

    def load_all(self) -> int:
        for k in self.artifacts.kernels:
            self.kernel(k.name)
        return len(self.artifacts.kernels)
