"""CUDA driver backend through cuda-python (`cuda.bindings.driver`).

The seam for other backends is this class's method set (load_module, get_function, limits,
function_attributes, set_max_dynamic_shared, launch, alloc/free/copies); a HIP backend built on
hip-python would provide the same methods.
"""

from __future__ import annotations

import ctypes

from cuda.bindings import driver as cu

from tritonforge.errors import TritonforgeError


class CudaError(TritonforgeError, RuntimeError):
    def __init__(self, what: str, err):
        name = getattr(err, "name", str(err))
        res = cu.cuGetErrorString(err)
        text = res[1].decode() if res[0] == cu.CUresult.CUDA_SUCCESS and res[1] else "unknown error"
        super().__init__(f"{what}: {name}: {text}")
        self.code = int(err)


def check(result, what: str):
    """Unwrap a cuda-python (err, *values) tuple, raising CudaError with the driver's message."""
    err, *values = result
    if err != cu.CUresult.CUDA_SUCCESS:
        raise CudaError(what, err)
    if not values:
        return None
    return values[0] if len(values) == 1 else tuple(values)


def driver_available() -> tuple[bool, str]:
    """(True, device name) when a CUDA driver and device answer; else (False, why)."""
    try:
        err, = cu.cuInit(0)
        if err != cu.CUresult.CUDA_SUCCESS:
            return False, f"cuInit failed: {getattr(err, 'name', err)}"
        n = check(cu.cuDeviceGetCount(), "cuDeviceGetCount")
        if n < 1:
            return False, "no CUDA device"
        dev = check(cu.cuDeviceGet(0), "cuDeviceGet")
        return True, check(cu.cuDeviceGetName(256, dev), "cuDeviceGetName").split(b"\0")[0].decode()
    except Exception as exc:  # no libcuda.so, wrong driver, ...
        return False, f"{type(exc).__name__}: {exc}"


class CudaBackend:
    name = "cuda"
    binary_format = "cubin"

    def __init__(self, device: int = 0):
        check(cu.cuInit(0), "cuInit")
        self.device = check(cu.cuDeviceGet(device), f"cuDeviceGet({device})")
        self.context = check(cu.cuDevicePrimaryCtxRetain(self.device), "cuDevicePrimaryCtxRetain")
        check(cu.cuCtxSetCurrent(self.context), "cuCtxSetCurrent")
        a = cu.CUdevice_attribute
        attr = lambda x: check(cu.cuDeviceGetAttribute(x, self.device), f"cuDeviceGetAttribute({x.name})")
        self.limits = {
            "max_threads_per_block": attr(a.CU_DEVICE_ATTRIBUTE_MAX_THREADS_PER_BLOCK),
            "max_shared_optin": attr(a.CU_DEVICE_ATTRIBUTE_MAX_SHARED_MEMORY_PER_BLOCK_OPTIN),
            "max_grid": (attr(a.CU_DEVICE_ATTRIBUTE_MAX_GRID_DIM_X), attr(a.CU_DEVICE_ATTRIBUTE_MAX_GRID_DIM_Y),
                         attr(a.CU_DEVICE_ATTRIBUTE_MAX_GRID_DIM_Z)),
            "cc": (attr(a.CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MAJOR),
                   attr(a.CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MINOR)),
            "sm_count": attr(a.CU_DEVICE_ATTRIBUTE_MULTIPROCESSOR_COUNT),
            "l2_bytes": attr(a.CU_DEVICE_ATTRIBUTE_L2_CACHE_SIZE),
            "clusters": bool(attr(a.CU_DEVICE_ATTRIBUTE_CLUSTER_LAUNCH)),
            "memory_bytes": int(check(cu.cuDeviceTotalMem(self.device), "cuDeviceTotalMem")),
        }
        self.device_name = check(cu.cuDeviceGetName(256, self.device), "cuDeviceGetName").split(b"\0")[0].decode()
        self.driver_version = check(cu.cuDriverGetVersion(), "cuDriverGetVersion")

    @property
    def arch(self) -> str:
        major, minor = self.limits["cc"]
        return f"{major}{minor}"

    def context_key(self) -> int:
        return int(check(cu.cuCtxGetCurrent(), "cuCtxGetCurrent"))

    def make_current(self) -> None:
        check(cu.cuCtxSetCurrent(self.context), "cuCtxSetCurrent")

    # -- modules and functions
    def load_module(self, image: bytes, what: str):
        buf = ctypes.create_string_buffer(image, len(image))  # stable address for the driver to parse
        return check(cu.cuModuleLoadData(ctypes.addressof(buf)), f"cuModuleLoadData({what})")

    def get_function(self, module, func_name: str, what: str):
        return check(cu.cuModuleGetFunction(module, func_name.encode()), f"cuModuleGetFunction({what})")

    def function_attributes(self, func) -> dict:
        f = cu.CUfunction_attribute
        get = lambda x: check(cu.cuFuncGetAttribute(x, func), f"cuFuncGetAttribute({x.name})")
        return {"max_threads_per_block": get(f.CU_FUNC_ATTRIBUTE_MAX_THREADS_PER_BLOCK),
                "static_shared": get(f.CU_FUNC_ATTRIBUTE_SHARED_SIZE_BYTES),
                "num_regs": get(f.CU_FUNC_ATTRIBUTE_NUM_REGS),
                # the arch of the code the driver loaded (90: SASS for sm_90, or PTX it JIT-compiled)
                "binary_version": get(f.CU_FUNC_ATTRIBUTE_BINARY_VERSION)}

    def set_max_dynamic_shared(self, func, nbytes: int, what: str) -> None:
        check(cu.cuFuncSetAttribute(func, cu.CUfunction_attribute.CU_FUNC_ATTRIBUTE_MAX_DYNAMIC_SHARED_SIZE_BYTES,
                                    nbytes), f"cuFuncSetAttribute(MAX_DYNAMIC_SHARED_SIZE_BYTES, {what})")

    def allow_non_portable_clusters(self, func, what: str) -> None:
        """Let this function launch in clusters of more than the 8 portable programs (up to 16 on an H100
        or H200); a device that cannot raises CudaError."""
        check(cu.cuFuncSetAttribute(func, cu.CUfunction_attribute.CU_FUNC_ATTRIBUTE_NON_PORTABLE_CLUSTER_SIZE_ALLOWED,
                                    1), f"cuFuncSetAttribute(NON_PORTABLE_CLUSTER_SIZE_ALLOWED, {what})")

    def resident_blocks(self, func, block_x: int, shared: int, what: str) -> int:
        """How many blocks of this function the whole device runs at once (occupancy x SMs)."""
        per_sm = check(cu.cuOccupancyMaxActiveBlocksPerMultiprocessor(func, block_x, shared),
                       f"cuOccupancyMaxActiveBlocksPerMultiprocessor({what})")
        return int(per_sm) * self.limits["sm_count"]

    def launch(self, func, grid, block_x: int, shared: int, stream, params_addr: int, what: str,
               cooperative: bool = False, cluster: tuple[int, int, int] | None = None) -> None:
        """One launch, unprepared (see bind_launch for the repeated case)."""
        self.bind_launch(func, grid, block_x, shared, params_addr, what, cooperative, cluster)(stream)

    def bind_launch(self, func, grid, block_x: int, shared: int, params_addr: int, what: str,
                    cooperative: bool = False, cluster: tuple[int, int, int] | None = None):
        """A closure that fires this exact launch: everything but the stream is bound once, so a call
        costs one cuda-python cuLaunchKernel (measured faster here than calling the driver via ctypes).
        Cooperative launches guarantee every block is resident at once (the driver refuses otherwise);
        a cluster dimension makes each `cluster` of blocks run together, sharing shared memory."""
        if cluster is not None:
            return self._bind_cluster_launch(func, grid, block_x, shared, params_addr, what, cluster)
        ok, default_stream = cu.CUresult.CUDA_SUCCESS, cu.CUstream(0)
        gx, gy, gz = grid
        if cooperative:
            coop = cu.cuLaunchCooperativeKernel

            def fire(stream=None):
                err, = coop(func, gx, gy, gz, block_x, 1, 1, shared,
                            default_stream if stream is None else stream, params_addr)
                if err != ok:
                    raise CudaError(f"cuLaunchCooperativeKernel({what})", err)

            return fire
        launch = cu.cuLaunchKernel

        def fire(stream=None):
            err, = launch(func, gx, gy, gz, block_x, 1, 1, shared,
                          default_stream if stream is None else stream, params_addr, 0)
            if err != ok:
                raise CudaError(f"cuLaunchKernel({what})", err)

        return fire

    @staticmethod
    def _cluster_config(grid, block_x: int, shared: int, cluster):
        config = cu.CUlaunchConfig()
        config.gridDimX, config.gridDimY, config.gridDimZ = grid
        config.blockDimX, config.blockDimY, config.blockDimZ = block_x, 1, 1
        config.sharedMemBytes = shared
        attr = cu.CUlaunchAttribute()
        attr.id = cu.CUlaunchAttributeID.CU_LAUNCH_ATTRIBUTE_CLUSTER_DIMENSION
        attr.value.clusterDim.x, attr.value.clusterDim.y, attr.value.clusterDim.z = cluster
        config.attrs = [attr]
        config.numAttrs = 1
        return config

    def resident_clusters(self, func, block_x: int, shared: int, cluster, what: str) -> int:
        """How many clusters of this shape the whole device runs at once (0: one does not fit a GPC)."""
        config = self._cluster_config(cluster, block_x, shared, cluster)
        return int(check(cu.cuOccupancyMaxActiveClusters(func, config), f"cuOccupancyMaxActiveClusters({what})"))

    def _bind_cluster_launch(self, func, grid, block_x: int, shared: int, params_addr: int, what: str, cluster):
        config = self._cluster_config(grid, block_x, shared, cluster)
        ok, default_stream, launch = cu.CUresult.CUDA_SUCCESS, cu.CUstream(0), cu.cuLaunchKernelEx

        def fire(stream=None):
            config.hStream = default_stream if stream is None else stream
            err, = launch(config, func, params_addr, 0)
            if err != ok:
                raise CudaError(f"cuLaunchKernelEx({what}, cluster {cluster})", err)

        return fire

    # -- memory and synchronisation
    def alloc(self, nbytes: int) -> int:
        return int(check(cu.cuMemAlloc(max(1, nbytes)), f"cuMemAlloc({nbytes})"))

    def free(self, ptr: int) -> None:
        check(cu.cuMemFree(ptr), "cuMemFree")

    def copy_htod(self, dst: int, src_addr: int, nbytes: int) -> None:
        check(cu.cuMemcpyHtoD(dst, src_addr, nbytes), "cuMemcpyHtoD")

    def copy_dtoh(self, dst_addr: int, src: int, nbytes: int) -> None:
        check(cu.cuMemcpyDtoH(dst_addr, src, nbytes), "cuMemcpyDtoH")

    def copy_dtod(self, dst: int, src: int, nbytes: int, stream: int = 0) -> None:
        check(cu.cuMemcpyDtoDAsync(dst, src, nbytes, stream), "cuMemcpyDtoDAsync")

    def memset(self, ptr: int, byte: int, nbytes: int) -> None:
        check(cu.cuMemsetD8(ptr, byte, nbytes), "cuMemsetD8")

    def synchronize(self) -> None:
        check(cu.cuCtxSynchronize(), "cuCtxSynchronize")

    # -- timing
    def event(self):
        return check(cu.cuEventCreate(cu.CUevent_flags.CU_EVENT_DEFAULT), "cuEventCreate")

    def record(self, event, stream: int = 0) -> None:
        check(cu.cuEventRecord(event, stream), "cuEventRecord")

    def elapsed_ms(self, start, end) -> float:
        check(cu.cuEventSynchronize(end), "cuEventSynchronize")
        return float(check(cu.cuEventElapsedTime(start, end), "cuEventElapsedTime"))
