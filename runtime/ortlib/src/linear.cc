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

#include "lt_kernel.h"

namespace tf {
namespace {

// Row-major Y (M, N) = X (M, K) W (K, N) is column-major Y^T (N, M) = W^T (N, K) X^T (K, M): cuBLASLt's A is W, its
// B is X, and the bias runs along D's rows.
using LinearKernelBase = LtKernel<std::tuple<int64_t, int64_t, int64_t, uint32_t, uint32_t, uint32_t, uint32_t>>;

class LinearKernel : public LinearKernelBase {
 public:
  LinearKernel(const OrtKernelInfo* info, bool cuda) : LinearKernelBase(info, "Linear", cuda) {}

 protected:
  void Compute(Ort::KernelContext& ctx) override {
    auto x = ctx.GetInput(0), w = ctx.GetInput(1), bias = ctx.GetInput(2);
    const Input in = input_x(x);
    const std::vector<int64_t>& xs = in.shape;
    const auto ws = w.GetTensorTypeAndShapeInfo().GetShape();
    if (xs.empty()) bad("input X is a scalar; expected (..., K)");
    if (float_type(w, "W") != in.dtype) bad("input W's element type differs from X's");
    const int64_t k = xs.back();
    if (ws.size() != 2 || ws[0] != k)
      bad("input W has shape " + shape_str(ws) + "; expected (" + std::to_string(k) + ", N), K from X " +
          shape_str(xs));
    const int64_t n = ws[1], m = product(xs, 0, xs.size() - 1);
    auto y = output_for(ctx, bias, in, n);
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
    const LtPlan& plan = plan_for(in.type, m, k, n, ptrs, xs, ws, st);
    const void* bias_ptr = ptrs[2];
    plan.lt->check(plan.lt->DescSet(plan.desc, DESC_BIAS_POINTER, &bias_ptr, sizeof bias_ptr), "setting the bias");
    LtStatus s = matmul(plan, plan.pick, ptrs[1], ptrs[0], const_cast<void*>(ptrs[3]), st);
    if (s != 0)
      throw std::runtime_error("cublasLtMatmul of X " + shape_str(xs) + " by W " + shape_str(ws) + " " + in.dtype +
                               " failed: cuBLAS status " + std::to_string(s));
  }

 private:
  void cpu(const void* x, const void* w, const void* b, void* y, ONNXTensorElementDataType t, int64_t m, int64_t k,
           int64_t n) const {
    std::vector<double> wd(static_cast<size_t>(k * n));
    for (int64_t i = 0; i < k * n; ++i) wd[i] = load(w, t, i);
    linear_cpu(x, wd, b, y, t, m, k, n, gelu_);
  }

  // The shape's plan, made on its first run for these pointers' alignments: the fastest of the heuristic's picks
  // on `st` (each writes Y, which the run then writes again), or its first where they cannot be timed.
  const LtPlan& plan_for(ONNXTensorElementDataType type, int64_t m, int64_t k, int64_t n, const void* const ptrs[4],
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
    auto plan = std::make_unique<LtPlan>();
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
    const uint32_t aligns[] = {std::get<4>(key), std::get<3>(key), std::get<5>(key), std::get<5>(key)};
    choose_algo(handle_, *plan, aligns, st, [&](size_t bytes) { memory_.scratch(kLtWorkspace, bytes); },
                [&](const LtHeuristic& h) {
                  return matmul(*plan, h, ptrs[1], ptrs[0], const_cast<void*>(ptrs[3]), st);
                },
                "X " + shape_str(xs) + " by W " + shape_str(ws) + (gelu_ ? " with the bias and GELU" : " with the bias"));
    return *(plans_[key] = std::move(plan));
  }

};

OrtStatusPtr linear_shape(const OrtCustomOp*, OrtShapeInferContext* ctx) {
  return shape_n_from_w(ctx, 1, "tritonforge_linear_n");
}

}  // namespace

void choose_algo(LtHandle handle, LtPlan& plan, const uint32_t aligns[4], void* st,
                 const std::function<void(size_t)>& workspace,
                 const std::function<LtStatus(const LtHeuristic&)>& matmul, const std::string& what) {
  const CublasLt& lt = *plan.lt;
  LtPref pref = nullptr;
  lt.check(lt.PrefCreate(&pref), "cublasLtMatmulPreferenceCreate");
  const int32_t align_attrs[] = {PREF_ALIGN_A, PREF_ALIGN_B, PREF_ALIGN_C, PREF_ALIGN_D};
  LtStatus s = lt.PrefSet(pref, PREF_MAX_WORKSPACE, &kMaxWorkspace, sizeof kMaxWorkspace);
  for (int i = 0; i < 4 && s == 0; ++i) s = lt.PrefSet(pref, align_attrs[i], &aligns[i], sizeof aligns[i]);
  int found = 0;
  LtHeuristic picks[kCandidates] = {};
  if (s == 0) s = lt.Heuristic(handle, plan.desc, plan.a, plan.b, plan.d, plan.d, pref, kCandidates, picks, &found);
  lt.PrefDestroy(pref);
  lt.check(s, "cublasLtMatmulAlgoGetHeuristic");
  if (found < 1) throw std::runtime_error("cuBLASLt (" + lt.path + ") has no algorithm for " + what);
  plan.pick = picks[0];
  if (found > 1 && may_time(st)) {
    size_t most = 0;  // allocated before timing: no allocation inside the timing's graph capture
    for (int i = 0; i < found; ++i) most = std::max(most, picks[i].workspace);
    if (most) workspace(most);
    plan.pick = picks[fastest(st, found, [&](size_t i) { return picks[i].state == 0 && matmul(picks[i]) == 0; })];
  }
}

void linear_cpu(const void* x, const std::vector<double>& w, const void* b, void* y, ONNXTensorElementDataType t,
                int64_t m, int64_t k, int64_t n, bool gelu, const float* xf) {
  std::vector<double> acc(static_cast<size_t>(n));
  for (int64_t r = 0; r < m; ++r) {
    for (int64_t j = 0; j < n; ++j) acc[j] = load(b, t, j);
    for (int64_t i = 0; i < k; ++i) {
      const double xv = xf ? xf[r * k + i] : load(x, t, r * k + i);
      const double* row = &w[i * n];
      for (int64_t j = 0; j < n; ++j) acc[j] += xv * row[j];
    }
    for (int64_t j = 0; j < n; ++j) {
      double v = acc[j];
      if (gelu) v = 0.5 * v * (1 + std::tanh(0.7978845608028654 * (v + 0.044715 * v * v * v)));
      store(y, t, r * n + j, static_cast<float>(v));
    }
  }
}

// Y is X's shape with W's dim `n_axis` last (from ORT's shapes of X and W: either may be symbolic or unknown).
OrtStatusPtr shape_n_from_w(OrtShapeInferContext* ctx, int n_axis, const char* symbol) {
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
      const bool known = w_rank == 2 && w_dims[n_axis] >= 0;
      dims.back() = known ? w_dims[n_axis] : -1;
      names.push_back(known ? "" : symbol);  // -1 would read back as a fixed size
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

namespace {

struct LinearOp : TypedOp<LinearOp, LinearKernel> {
  LinearOp(bool cuda, ONNXTensorElementDataType type) : TypedOp(cuda, type) { InferOutputShapeFn = linear_shape; }
  const char* GetName() const { return "Linear"; }
  size_t GetInputTypeCount() const { return 3; }
  size_t GetOutputTypeCount() const { return 1; }
};

}  // namespace

std::vector<OrtCustomOp*> linear_ops(bool cuda) { return typed_ops<LinearOp>(cuda); }

}  // namespace tf
