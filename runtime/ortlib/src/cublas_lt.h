// cuBLASLt, opened at run time (the library links no CUDA; onnxruntime-gpu's CUDA EP has loaded it already): the
// few entry points and the header's constants the Linear ops use (linear.cc, fp8_linear.cc).
#pragma once
#include <dlfcn.h>

#include <cstdint>
#include <functional>
#include <stdexcept>
#include <string>
#include <type_traits>

namespace tf {

using LtStatus = int;
using LtHandle = void*;
using LtDesc = void*;
using LtLayout = void*;
using LtPref = void*;
struct LtAlgo {
  uint64_t data[8];
};
struct LtHeuristic {
  LtAlgo algo;
  size_t workspace;
  LtStatus state;
  float waves;
  int reserved[4];
};
enum : int32_t {
  R_32F = 0, R_16F = 2, R_16BF = 14,                      // cudaDataType_t
  COMPUTE_32F = 68,                                        // cublasComputeType_t
  DESC_TRANSA = 3, DESC_TRANSB = 4, DESC_EPILOGUE = 7, DESC_BIAS_POINTER = 8,  // cublasLtMatmulDescAttributes_t
  PREF_MAX_WORKSPACE = 1, PREF_ALIGN_A = 5, PREF_ALIGN_B = 6, PREF_ALIGN_C = 7, PREF_ALIGN_D = 8,
  OP_N = 0,
};
enum : uint32_t { EPILOGUE_BIAS = 4, EPILOGUE_GELU_BIAS = 36 };
constexpr uint64_t kMaxWorkspace = 4 << 20;  // per node: hundreds of Linears share a model's memory
constexpr int kCandidates = 8;               // the heuristic's picks timed per shape

struct CublasLt {
  std::string error;  // why it cannot run, or ""
  std::string path;
  LtStatus (*Create)(LtHandle*) = nullptr;
  LtStatus (*Destroy)(LtHandle) = nullptr;
  LtStatus (*DescCreate)(LtDesc*, int32_t, int32_t) = nullptr;
  LtStatus (*DescDestroy)(LtDesc) = nullptr;
  LtStatus (*DescSet)(LtDesc, int32_t, const void*, size_t) = nullptr;
  LtStatus (*LayoutCreate)(LtLayout*, int32_t, uint64_t, uint64_t, int64_t) = nullptr;
  LtStatus (*LayoutDestroy)(LtLayout) = nullptr;
  LtStatus (*PrefCreate)(LtPref*) = nullptr;
  LtStatus (*PrefDestroy)(LtPref) = nullptr;
  LtStatus (*PrefSet)(LtPref, int32_t, const void*, size_t) = nullptr;
  LtStatus (*Heuristic)(LtHandle, LtDesc, LtLayout, LtLayout, LtLayout, LtLayout, LtPref, int, LtHeuristic*,
                        int*) = nullptr;
  LtStatus (*Matmul)(LtHandle, LtDesc, const void*, const void*, LtLayout, const void*, LtLayout, const void*,
                     const void*, LtLayout, void*, LtLayout, const LtAlgo*, void*, size_t, void*) = nullptr;

  CublasLt() {
    void* lib = nullptr;
    for (const char* name : {"libcublasLt.so.13", "libcublasLt.so.12", "libcublasLt.so"}) {
      if ((lib = dlopen(name, RTLD_NOW | RTLD_LOCAL))) {
        path = name;
        break;
      }
    }
    if (!lib) {
      error = "cannot open libcublasLt.so.13 or .12 (cuBLASLt, which onnxruntime-gpu's CUDA EP loads too): " +
              std::string(dlerror());
      return;
    }
    auto get = [&](auto& fn, const char* symbol) {
      fn = reinterpret_cast<std::remove_reference_t<decltype(fn)>>(dlsym(lib, symbol));
      if (!fn && error.empty()) error = path + " has no " + symbol;
    };
    get(Create, "cublasLtCreate");
    get(Destroy, "cublasLtDestroy");
    get(DescCreate, "cublasLtMatmulDescCreate");
    get(DescDestroy, "cublasLtMatmulDescDestroy");
    get(DescSet, "cublasLtMatmulDescSetAttribute");
    get(LayoutCreate, "cublasLtMatrixLayoutCreate");
    get(LayoutDestroy, "cublasLtMatrixLayoutDestroy");
    get(PrefCreate, "cublasLtMatmulPreferenceCreate");
    get(PrefDestroy, "cublasLtMatmulPreferenceDestroy");
    get(PrefSet, "cublasLtMatmulPreferenceSetAttribute");
    get(Heuristic, "cublasLtMatmulAlgoGetHeuristic");
    get(Matmul, "cublasLtMatmul");
  }

  void check(LtStatus s, const char* what) const {
    if (s != 0) throw std::runtime_error(std::string(what) + " failed: cuBLAS status " + std::to_string(s));
  }
};

inline const CublasLt& cublas_lt() {
  static CublasLt lt;  // opened once, by whichever thread comes first
  if (!lt.error.empty()) throw std::runtime_error(lt.error);
  return lt;
}

// The largest power of two up to 256 dividing a device address: what the heuristic is told of each pointer.
inline uint32_t alignment(const void* p) {
  uint32_t a = 256;
  while (a > 1 && reinterpret_cast<uintptr_t>(p) % a) a /= 2;
  return a;
}

// One shape's matmul: descriptors, layouts and the heuristic's algorithm, released with it.
struct LtPlan {
  const CublasLt* lt = nullptr;
  LtDesc desc = nullptr;
  LtLayout a = nullptr, b = nullptr, d = nullptr;
  LtHeuristic pick{};
  ~LtPlan() {
    if (!lt) return;
    for (LtLayout l : {a, b, d})
      if (l) lt->LayoutDestroy(l);
    if (desc) lt->DescDestroy(desc);
  }
};

// Makes plan.pick the fastest on `st` of the heuristic's picks under these pointer alignments (A, B, C, D), or its
// first where they cannot be timed: `workspace(bytes)` allocates before timing, `matmul(pick)` runs one (each
// writes the output, which the run then writes again). Throws naming `what` when cuBLASLt has none (linear.cc).
void choose_algo(LtHandle handle, LtPlan& plan, const uint32_t aligns[4], void* st,
                 const std::function<void(size_t)>& workspace,
                 const std::function<LtStatus(const LtHeuristic&)>& matmul, const std::string& what);

}  // namespace tf
