// Stand-in for ONNX Runtime's CUDADriverWrapper: the driver entry points its SparseAttention sources call,
// from libcuda opened at run time (as ORT does), and cuErrCheck throwing with the driver's error name.
#pragma once
#include <cuda.h>
#include <dlfcn.h>

#include <stdexcept>
#include <string>

namespace onnxruntime {
namespace contrib {
namespace cuda {

class CUDADriverWrapper {
 public:
  static const CUDADriverWrapper* GetInstance() {
    static CUDADriverWrapper w;
    return &w;
  }
#define TF_DRIVER(name, ...) \
  CUresult (*name##_)(__VA_ARGS__) = nullptr;
  TF_DRIVER(cuModuleLoadData, CUmodule*, const void*)
  TF_DRIVER(cuModuleUnload, CUmodule)
  TF_DRIVER(cuModuleGetFunction, CUfunction*, CUmodule, const char*)
  TF_DRIVER(cuFuncSetAttribute, CUfunction, CUfunction_attribute, int)
  TF_DRIVER(cuFuncSetCacheConfig, CUfunction, CUfunc_cache)
  TF_DRIVER(cuDeviceGetAttribute, int*, CUdevice_attribute, CUdevice)
  TF_DRIVER(cuCtxGetDevice, CUdevice*)
  TF_DRIVER(cuGetErrorName, CUresult, const char**)
  TF_DRIVER(cuLaunchKernel, CUfunction, unsigned, unsigned, unsigned, unsigned, unsigned, unsigned, unsigned,
            CUstream, void**, void**)
#undef TF_DRIVER
  CUresult cuModuleLoadData(CUmodule* m, const void* image) const { return cuModuleLoadData_(m, image); }
  CUresult cuModuleUnload(CUmodule m) const { return cuModuleUnload_(m); }
  CUresult cuModuleGetFunction(CUfunction* f, CUmodule m, const char* n) const { return cuModuleGetFunction_(f, m, n); }
  CUresult cuFuncSetAttribute(CUfunction f, CUfunction_attribute a, int v) const { return cuFuncSetAttribute_(f, a, v); }
  CUresult cuFuncSetCacheConfig(CUfunction f, CUfunc_cache c) const { return cuFuncSetCacheConfig_(f, c); }
  CUresult cuDeviceGetAttribute(int* v, CUdevice_attribute a, CUdevice d) const { return cuDeviceGetAttribute_(v, a, d); }
  CUresult cuCtxGetDevice(CUdevice* d) const { return cuCtxGetDevice_(d); }
  CUresult cuLaunchKernel(CUfunction f, unsigned gx, unsigned gy, unsigned gz, unsigned bx, unsigned by, unsigned bz,
                          unsigned shared, CUstream s, void** params, void** extra) const {
    return cuLaunchKernel_(f, gx, gy, gz, bx, by, bz, shared, s, params, extra);
  }
  std::string name(CUresult r) const {
    const char* n = nullptr;
    return cuGetErrorName_ && cuGetErrorName_(r, &n) == CUDA_SUCCESS && n ? n : std::to_string(static_cast<int>(r));
  }

 private:
  CUDADriverWrapper() {
    void* lib = dlopen("libcuda.so.1", RTLD_NOW | RTLD_LOCAL);
    if (!lib) throw std::runtime_error("libcuda.so.1 not found");
    auto get = [lib](const char* n) {
      void* p = dlsym(lib, n);
      if (!p) throw std::runtime_error(std::string("libcuda has no ") + n);
      return p;
    };
    cuModuleLoadData_ = reinterpret_cast<decltype(cuModuleLoadData_)>(get("cuModuleLoadData"));
    cuModuleUnload_ = reinterpret_cast<decltype(cuModuleUnload_)>(get("cuModuleUnload"));
    cuModuleGetFunction_ = reinterpret_cast<decltype(cuModuleGetFunction_)>(get("cuModuleGetFunction"));
    cuFuncSetAttribute_ = reinterpret_cast<decltype(cuFuncSetAttribute_)>(get("cuFuncSetAttribute"));
    cuFuncSetCacheConfig_ = reinterpret_cast<decltype(cuFuncSetCacheConfig_)>(get("cuFuncSetCacheConfig"));
    cuDeviceGetAttribute_ = reinterpret_cast<decltype(cuDeviceGetAttribute_)>(get("cuDeviceGetAttribute"));
    cuCtxGetDevice_ = reinterpret_cast<decltype(cuCtxGetDevice_)>(get("cuCtxGetDevice"));
    cuGetErrorName_ = reinterpret_cast<decltype(cuGetErrorName_)>(get("cuGetErrorName"));
    cuLaunchKernel_ = reinterpret_cast<decltype(cuLaunchKernel_)>(get("cuLaunchKernel"));
  }
};

inline void cuErrCheck_(CUresult r, const CUDADriverWrapper& d, const char* file, int line) {
  if (r != CUDA_SUCCESS) throw std::runtime_error(std::string(file) + ":" + std::to_string(line) + ": " + d.name(r));
}
#define cuErrCheck(stat, wrap) cuErrCheck_((stat), (wrap), __FILE__, __LINE__)

}  // namespace cuda
}  // namespace contrib
}  // namespace onnxruntime
