// Linear: a MatMul by a weight with its bias, and the GELU-tanh after it where there is one, as one node:
// Y = act(X @ W + bias) (the diffusion transformers' projections and MLPs, which the export writes as a MatMul and
// a bias Add that ORT runs as a GEMM and a broadcast-bias pass over the output, and a GELU as one more). On CUDA one
// cuBLASLt matmul with the bias (and the GELU) in its epilogue: libcublasLt is opened at run time (the library
// links no CUDA; onnxruntime-gpu's CUDA EP has loaded it already), the algorithm the fastest of cuBLASLt's
// heuristic's first few, timed on the node's stream the first time a shape runs (its first pick while the stream is
// captured, or with TRITONFORGE_ORT_TUNING=0). Plain C++ in double on the CPU.
//
// Inputs: X (..., K), W (K, N), bias (N), one element type (float, float16 or bfloat16). Output: Y (..., N).
// Attribute: activation, "none" (the default) or "gelu_tanh" (0.5 x (1 + tanh(sqrt(2/pi) (x + 0.044715 x^3))),
// cuBLASLt's GELU).
#include <dlfcn.h>

#include <algorithm>
#include <map>
#include <mutex>
#include <tuple>

#include "op_base.h"

namespace tf {
namespace {

// ---- cuBLASLt, opened at run time: the few entry points and the header's constants this op uses ----------------
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

const CublasLt& cublas_lt() {
  static CublasLt lt;  // opened once, by whichever thread comes first
  if (!lt.error.empty()) throw std::runtime_error(lt.error);
  return lt;
}

// The largest power of two up to 256 dividing a device address: what the heuristic is told of each pointer.
uint32_t alignment(const void* p) {
  uint32_t a = 256;
  while (a > 1 && reinterpret_cast<uintptr_t>(p) % a) a /= 2;
  return a;
}

// One shape's matmul: descriptors, layouts and the heuristic's algorithm. Row-major Y (M, N) = X (M, K) W (K, N) is
// column-major Y^T (N, M) = W^T (N, K) X^T (K, M): cuBLASLt's A is W, its B is X, and the bias runs along D's rows.
struct Plan {
  const CublasLt* lt = nullptr;
  LtDesc desc = nullptr;
  LtLayout a = nullptr, b = nullptr, d = nullptr;
  LtHeuristic pick{};
  ~Plan() {
    if (!lt) return;
    for (LtLayout l : {a, b, d})
      if (l) lt->LayoutDestroy(l);
    if (desc) lt->DescDestroy(desc);
  }
};

class LinearKernel : public KernelBase {
 public:
  LinearKernel(const OrtKernelInfo* info, bool cuda) : KernelBase(info, "Linear", cuda) {
    const std::string act = attr_string(info, "activation", "none");
    if (act != "none" && act != "gelu_tanh")
      throw Ort::Exception(std::string(kDomain) + ".Linear node '" + node_ + "': activation '" + act +
                               "' is not one of none, gelu_tanh",
                           ORT_INVALID_ARGUMENT);
    gelu_ = act == "gelu_tanh";
  }
  ~LinearKernel() override {
    std::lock_guard<std::mutex> lock(mu_);
    plans_.clear();
    if (handle_) cublas_lt().Destroy(handle_);
  }

 protected:
  void Compute(Ort::KernelContext& ctx) override {
    auto x = ctx.GetInput(0), w = ctx.GetInput(1), bias = ctx.GetInput(2);
    const Input in = input_x(x);
    const std::vector<int64_t>& xs = in.shape;
    const auto ws = w.GetTensorTypeAndShapeInfo().GetShape();
    if (xs.empty()) bad("input X is a scalar; expected (..., K)");
    if (float_type(w, "W") != in.dtype) bad("input W's element type differs from X's");
    if (float_type(bias, "bias") != in.dtype) bad("input bias's element type differs from X's");
    const int64_t k = xs.back();
    if (ws.size() != 2 || ws[0] != k)
      bad("input W has shape " + shape_str(ws) + "; expected (" + std::to_string(k) + ", N), K from X " +
          shape_str(xs));
    const int64_t n = ws[1], m = product(xs, 0, xs.size() - 1);
    const auto bs = bias.GetTensorTypeAndShapeInfo().GetShape();
    if (product(bs) != n || (!bs.empty() && bs.back() != n))
      bad("input bias has shape " + shape_str(bs) + "; expected (" + std::to_string(n) + "), W's N");
    std::vector<int64_t> ys = xs;
    ys.back() = n;
    auto y = ctx.GetOutput(0, ys);
    if (m * n == 0) return;
    if (!cuda_) return cpu(x.GetTensorRawData(), w.GetTensorRawData(), bias.GetTensorRawData(),
                           y.GetTensorMutableRawData(), in.type, m, k, n);
    if (m > INT32_MAX || n > INT32_MAX || k > INT32_MAX)
      bad("X " + shape_str(xs) + " by W " + shape_str(ws) + " has a dimension past 2^31 - 1, which cuBLASLt's "
          "kernels do not index");
    void* out = y.GetTensorMutableRawData();
    const void* ptrs[] = {x.GetTensorRawData(), w.GetTensorRawData(), bias.GetTensorRawData(), out};
    std::lock_guard<std::mutex> lock(mu_);  // a session's threads share the node's plans and workspace
    void* st = stream(ctx);
    const Plan& plan = plan_for(in.type, m, k, n, ptrs, xs, ws, st);
    const void* bias_ptr = ptrs[2];
    plan.lt->check(plan.lt->DescSet(plan.desc, DESC_BIAS_POINTER, &bias_ptr, sizeof bias_ptr), "setting the bias");
    LtStatus s = matmul(plan, plan.pick, ptrs, st);
    if (s != 0)
      throw std::runtime_error("cublasLtMatmul of X " + shape_str(xs) + " by W " + shape_str(ws) + " " + in.dtype +
                               " failed: cuBLAS status " + std::to_string(s));
  }

 private:
  void cpu(const void* x, const void* w, const void* b, void* y, ONNXTensorElementDataType t, int64_t m, int64_t k,
           int64_t n) const {
    std::vector<double> wd(static_cast<size_t>(k * n)), acc(static_cast<size_t>(n));
    for (int64_t i = 0; i < k * n; ++i) wd[i] = load(w, t, i);
    for (int64_t r = 0; r < m; ++r) {
      for (int64_t j = 0; j < n; ++j) acc[j] = load(b, t, j);
      for (int64_t i = 0; i < k; ++i) {
        const double xv = load(x, t, r * k + i);
        const double* row = &wd[i * n];
        for (int64_t j = 0; j < n; ++j) acc[j] += xv * row[j];
      }
      for (int64_t j = 0; j < n; ++j) {
        double v = acc[j];
        if (gelu_) v = 0.5 * v * (1 + std::tanh(0.7978845608028654 * (v + 0.044715 * v * v * v)));
        store(y, t, r * n + j, static_cast<float>(v));
      }
    }
  }

  LtStatus matmul(const Plan& plan, const LtHeuristic& h, const void* const ptrs[4], void* st) {
    void* workspace = h.workspace ? reinterpret_cast<void*>(memory_.scratch(0, h.workspace)) : nullptr;
    const float one = 1.0f, zero = 0.0f;
    void* out = const_cast<void*>(ptrs[3]);
    return plan.lt->Matmul(handle_, plan.desc, &one, ptrs[1], plan.a, ptrs[0], plan.b, &zero, out, plan.d, out,
                           plan.d, &h.algo, workspace, h.workspace, st);
  }

  // The shape's plan, made on its first run for these pointers' alignments: the fastest of the heuristic's picks
  // on `st` (each writes Y, which the run then writes again), or its first where they cannot be timed.
  const Plan& plan_for(ONNXTensorElementDataType type, int64_t m, int64_t k, int64_t n, const void* const ptrs[4],
                       const std::vector<int64_t>& xs, const std::vector<int64_t>& ws, void* st) {
    const CublasLt& lt = cublas_lt();
    const auto key = std::make_tuple(m, k, n, alignment(ptrs[0]), alignment(ptrs[1]), alignment(ptrs[3]),
                                     alignment(ptrs[2]));  // the heuristic reads the bias pointer's alignment too
    auto found = plans_.find(key);
    if (found != plans_.end()) return *found->second;
    if (!handle_) lt.check(lt.Create(&handle_), "cublasLtCreate");
    const int32_t dt = type == ONNX_TENSOR_ELEMENT_DATA_TYPE_FLOAT     ? R_32F
                       : type == ONNX_TENSOR_ELEMENT_DATA_TYPE_FLOAT16 ? R_16F
                                                                       : R_16BF;
    auto plan = std::make_unique<Plan>();
    plan->lt = &lt;
    lt.check(lt.DescCreate(&plan->desc, COMPUTE_32F, R_32F), "cublasLtMatmulDescCreate");
    const int32_t op_n = OP_N;
    const uint32_t epilogue = gelu_ ? EPILOGUE_GELU_BIAS : EPILOGUE_BIAS;
    lt.check(lt.DescSet(plan->desc, DESC_TRANSA, &op_n, sizeof op_n), "setting transa");
    lt.check(lt.DescSet(plan->desc, DESC_TRANSB, &op_n, sizeof op_n), "setting transb");
    lt.check(lt.DescSet(plan->desc, DESC_EPILOGUE, &epilogue, sizeof epilogue), "setting the epilogue");
    lt.check(lt.DescSet(plan->desc, DESC_BIAS_POINTER, &ptrs[2], sizeof ptrs[2]), "setting the bias");
    lt.check(lt.LayoutCreate(&plan->a, dt, n, k, n), "cublasLtMatrixLayoutCreate(W)");
    lt.check(lt.LayoutCreate(&plan->b, dt, k, m, k), "cublasLtMatrixLayoutCreate(X)");
    lt.check(lt.LayoutCreate(&plan->d, dt, n, m, n), "cublasLtMatrixLayoutCreate(Y)");
    LtPref pref = nullptr;
    lt.check(lt.PrefCreate(&pref), "cublasLtMatmulPreferenceCreate");
    const uint32_t aligns[] = {std::get<4>(key), std::get<3>(key), std::get<5>(key), std::get<5>(key)};
    const int32_t align_attrs[] = {PREF_ALIGN_A, PREF_ALIGN_B, PREF_ALIGN_C, PREF_ALIGN_D};
    LtStatus s = lt.PrefSet(pref, PREF_MAX_WORKSPACE, &kMaxWorkspace, sizeof kMaxWorkspace);
    for (int i = 0; i < 4 && s == 0; ++i) s = lt.PrefSet(pref, align_attrs[i], &aligns[i], sizeof aligns[i]);
    int found_algos = 0;
    LtHeuristic picks[kCandidates] = {};
    if (s == 0) s = lt.Heuristic(handle_, plan->desc, plan->a, plan->b, plan->d, plan->d, pref, kCandidates, picks,
                                 &found_algos);
    lt.PrefDestroy(pref);
    lt.check(s, "cublasLtMatmulAlgoGetHeuristic");
    if (found_algos < 1)
      throw std::runtime_error("cuBLASLt (" + lt.path + ") has no algorithm for X " + shape_str(xs) + " by W " +
                               shape_str(ws) + (gelu_ ? " with the bias and GELU" : " with the bias"));
    plan->pick = picks[0];
    if (found_algos > 1 && may_time(st)) {
      size_t most = 0;  // allocated before timing: no allocation inside the timing's graph capture
      for (int i = 0; i < found_algos; ++i) most = std::max(most, picks[i].workspace);
      if (most) memory_.scratch(0, most);
      plan->pick = picks[fastest(st, found_algos, [&](size_t i) {
        return picks[i].state == 0 && matmul(*plan, picks[i], ptrs, st) == 0;
      })];
    }
    return *(plans_[key] = std::move(plan));
  }

  bool gelu_ = false;
  std::mutex mu_;
  LtHandle handle_ = nullptr;
  std::map<std::tuple<int64_t, int64_t, int64_t, uint32_t, uint32_t, uint32_t, uint32_t>, std::unique_ptr<Plan>> plans_;
};

// Y is X's shape with W's N last (from ORT's shapes of X and W: either may be symbolic or unknown).
OrtStatusPtr linear_shape(const OrtCustomOp*, OrtShapeInferContext* ctx) {
  const OrtApi& api = Ort::GetApi();
  OrtTensorTypeAndShapeInfo* info = nullptr;
  if (OrtStatusPtr s = shape_of_x(ctx, &info)) return s;
  OrtTensorTypeAndShapeInfo* w = nullptr;  // belongs to the context
  size_t rank = 0, w_rank = 0;
  OrtStatusPtr s = api.GetDimensionsCount(info, &rank);
  if (!s) s = api.ShapeInferContext_GetInputTypeShape(ctx, 1, &w);
  if (!s) s = api.GetDimensionsCount(w, &w_rank);
  if (!s && rank > 0) {
    std::vector<int64_t> dims(rank), w_dims(w_rank);
    std::vector<const char*> given(rank, nullptr);
    s = api.GetDimensions(info, dims.data(), rank);
    if (!s) s = api.GetSymbolicDimensions(info, given.data(), rank);
    if (!s && w_rank) s = api.GetDimensions(w, w_dims.data(), w_rank);
    if (!s) {
      // copies: the names point into `info`, which SetDimensions rewrites
      std::vector<std::string> names;
      for (size_t i = 0; i + 1 < rank; ++i) names.emplace_back(given[i] ? given[i] : "");
      const bool known = w_rank == 2 && w_dims[1] >= 0;
      dims.back() = known ? w_dims[1] : -1;
      names.push_back(known ? "" : "tritonforge_linear_n");  // -1 would read back as a fixed size
      std::vector<const char*> params;
      for (const auto& n : names) params.push_back(n.c_str());
      s = api.SetDimensions(info, dims.data(), rank);
      if (!s) s = api.SetSymbolicDimensions(info, params.data(), rank);
      if (!s) s = api.ShapeInferContext_SetOutputTypeShape(ctx, 0, info);
    }
  }
  api.ReleaseTensorTypeAndShapeInfo(info);
  return s;
}

struct LinearOp : TypedOp<LinearOp, LinearKernel> {
  LinearOp(bool cuda, ONNXTensorElementDataType type) : TypedOp(cuda, type) { InferOutputShapeFn = linear_shape; }
  const char* GetName() const { return "Linear"; }
  size_t GetInputTypeCount() const { return 3; }
  size_t GetOutputTypeCount() const { return 1; }
};

}  // namespace

std::vector<OrtCustomOp*> linear_ops(bool cuda) { return typed_ops<LinearOp>(cuda); }

}  // namespace tf
