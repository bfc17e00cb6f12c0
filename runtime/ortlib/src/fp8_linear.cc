// Fp8Linear: a Linear whose weight was quantized to fp8 e4m3 when the model was rewritten (one scale per output
// channel), its activations quantized per token as they arrive: Y = act((X_q * x_scale) (W_q * w_scale)^T + bias).
// On CUDA (sm_89 and newer: fp8 tensor cores) kernels/fp8_quant_rows_triton.py writes X's e4m3 rows and their scales
// and one cuBLASLt fp8 matmul applies both scale vectors (its outer-vector scale mode), the bias and the GELU in its
// epilogue, accumulating in fp32. On a GPU without fp8 tensor cores (older than sm_89), or with
// TRITONFORGE_ORT_FP8=dequantize set when the session is made (to check that path on a GPU with them), the same model
// runs dequantized: W times its scales in X's type, made once per node on the host (no Triton kernel, so any GPU the
// CUDA EP runs), and one cuBLASLt matmul of X unquantized with the bias and the GELU. On the CPU the same model runs
// with the fp8 GPU's numbers: X's rows are quantized as the kernel does (fp32 scale, round to nearest even,
// saturating), both operands dequantized and multiplied in double.
//
// Inputs: X (..., K) float16 or bfloat16 (or float on the CPU), W (N, K) float8e4m3fn, w_scale (N) float,
// bias (N) X's type. Output: Y (..., N) X's type. Attribute: activation, "none" (the default) or "gelu_tanh".
#include <algorithm>
#include <cmath>
#include <cstdlib>
#include <map>
#include <mutex>
#include <tuple>

#include "lt_kernel.h"

namespace tf {
namespace {

enum : int32_t {
  R_8F_E4M3 = 28, OP_T = 1,  // cudaDataType_t, cublasOperation_t
  DESC_A_SCALE_POINTER = 17, DESC_B_SCALE_POINTER = 18, DESC_BIAS_DATA_TYPE = 26, DESC_A_SCALE_MODE = 31,
  DESC_B_SCALE_MODE = 32,  // cublasLtMatmulDescAttributes_t (cuBLAS 12.9+)
  SCALE_MODE_OUTER_VEC_32F = 3,  // one fp32 scale per row of op(A) / column of op(B)
};
constexpr ONNXTensorElementDataType kE4M3 = ONNX_TENSOR_ELEMENT_DATA_TYPE_FLOAT8E4M3FN;
// scratch keys of the node's DeviceMemory: below the kernel indices Triton's own scratch is kept under
enum : int { kQuantRows = -1, kRowScales = -2, kDequantW = -4 };  // LtKernel's workspace is -3

// e4m3fn's value of a byte (0x7f and 0xff are NaN).
double e4m3(uint8_t b) {
  const int exp = (b >> 3) & 0xF, mant = b & 7;
  if ((b & 0x7F) == 0x7F) return NAN;
  const double mag = exp == 0 ? std::ldexp(mant, -9) : std::ldexp(1.0 + mant / 8.0, exp - 7);
  return (b & 0x80) ? -mag : mag;
}

// e4m3fn's byte nearest to `v` (ties to even), saturating at +-448: cvt.rn.satfinite.e4m3x2.f32's result.
uint8_t to_e4m3(float v) {
  if (std::isnan(v)) return 0x7F;
  const uint8_t sign = std::signbit(v) ? 0x80 : 0;
  const double a = std::fabs(static_cast<double>(v));
  if (a >= 448.0) return sign | 0x7E;
  if (a == 0.0) return sign;
  int e = 0;
  std::frexp(a, &e);  // a in [2^(e-1), 2^e)
  const int lowest = -6;  // the smallest normal exponent; below it the step stays 2^-9 (subnormals)
  const int exp = std::max(e - 1, lowest);
  // the step between neighbours is 2^(exp-3); a carry out of the mantissa lands on the next exponent's code
  const int q = static_cast<int>(std::nearbyint(std::ldexp(a, 3 - exp)));  // default rounding: to nearest, even
  const int code = exp == lowest && q < 8 ? q : ((exp + 7) << 3) + q - 8;
  return sign | static_cast<uint8_t>(std::min(code, 0x7E));
}

// Whether TRITONFORGE_ORT_FP8=dequantize asks for the path of GPUs without fp8 tensor cores on any GPU.
bool dequantize_asked() {
  const char* v = std::getenv("TRITONFORGE_ORT_FP8");
  return v && std::string(v) == "dequantize";
}

// (M, K, N, X's alignment (0: fp8, X's e4m3 rows are the node's scratch), W's, Y's, the bias's)
using Fp8LinearKernelBase =
    LtKernel<std::tuple<int64_t, int64_t, int64_t, uint32_t, uint32_t, uint32_t, uint32_t>>;

class Fp8LinearKernel : public Fp8LinearKernelBase {
 public:
  Fp8LinearKernel(const OrtKernelInfo* info, bool cuda) : Fp8LinearKernelBase(info, "Fp8Linear", cuda) {
    int constant = 0;
    try {
      Ort::ConstKernelInfo(info).GetTensorConstantInput(1, &constant);
    } catch (const Ort::Exception&) {
    }
    w_constant_ = constant != 0;
  }

 protected:
  void Compute(Ort::KernelContext& ctx) override {
    auto x = ctx.GetInput(0), w = ctx.GetInput(1), w_scale = ctx.GetInput(2), bias = ctx.GetInput(3);
    const Input in = input_x(x);
    const std::vector<int64_t>& xs = in.shape;
    if (xs.empty()) bad("input X is a scalar; expected (..., K)");
    auto wi = w.GetTensorTypeAndShapeInfo();
    if (wi.GetElementType() != kE4M3) bad("input W must be float8e4m3fn (the rewrite's quantized weight)");
    const auto ws = wi.GetShape();
    const int64_t k = xs.back();
    if (ws.size() != 2 || ws[1] != k)
      bad("input W has shape " + shape_str(ws) + "; expected (N, " + std::to_string(k) + "), K from X " +
          shape_str(xs));
    const int64_t n = ws[0], m = product(xs, 0, xs.size() - 1);
    per_channel_floats(w_scale, "w_scale", n, " (one scale per output channel)", ", W's N");
    auto y = output_for(ctx, bias, in, n);
    if (m * n == 0) return;
    if (!cuda_)
      return cpu(x.GetTensorRawData(), static_cast<const uint8_t*>(w.GetTensorRawData()),
                 w_scale.GetTensorData<float>(), bias.GetTensorRawData(), y.GetTensorMutableRawData(), in.type, m,
                 k, n);
    if (in.type == ONNX_TENSOR_ELEMENT_DATA_TYPE_FLOAT) bad("X is float: fp8 runs from float16 or bfloat16 on CUDA");
    if (m > INT32_MAX || n > INT32_MAX || k > INT32_MAX)
      bad("X " + shape_str(xs) + " by W " + shape_str(ws) + " has a dimension past 2^31 - 1, which cuBLASLt's "
          "kernels do not index");
    if (k == 0) bad("X " + shape_str(xs) + " has no features (K = 0): an fp8 GEMM has nothing to scale");
    if (k % 16 || n % 16)
      bad("X " + shape_str(xs) + " by W " + shape_str(ws) + ": cuBLASLt's fp8 matmul needs K and N multiples of 16");

    std::lock_guard<std::mutex> lock(mu_);  // a session's threads share the node's plans and buffers
    void* st = stream(ctx);
    if (!capability_) capability_ = compute_capability(st);  // a node's session runs on one GPU
    const bool fp8 = !dequantize_ && capability_ >= 89;
    // X (its e4m3 rows where fp8), W (as stored, or its dequantized copy), bias, Y, and the two scale vectors
    const void* ptrs[6] = {x.GetTensorRawData(), w.GetTensorRawData(), bias.GetTensorRawData(),
                           y.GetTensorMutableRawData(), nullptr, nullptr};
    if (fp8) {
      const uint64_t xq = memory_.scratch(kQuantRows, static_cast<size_t>(m * k));
      const uint64_t xscale = memory_.scratch(kRowScales, static_cast<size_t>(m) * sizeof(float));
      RoleValues r;
      r.u[R_OUT] = xq;
      r.u[R_ROW_SCALE] = xscale;
      r.u[R_IN] = reinterpret_cast<uint64_t>(ptrs[0]);
      r.u[R_BATCH] = m;
      r.u[R_N_COLS] = k;
      Problem p;
      p.batch = m, p.n_cols = k;
      run(OP_FP8_QUANT_ROWS, in.dtype, 0, p, r, "fp8_quant_rows_" + in.dtype,
          std::to_string(m) + "_" + std::to_string(k), memory_, st,
          [&] { return where("X " + shape_str(xs) + " " + in.dtype + " (fp8 runs on sm_89 and newer)"); });
      ptrs[0] = reinterpret_cast<const void*>(xq);
      ptrs[4] = w_scale.GetTensorRawData();
      ptrs[5] = reinterpret_cast<const void*>(xscale);
    } else {
      ptrs[1] = dequantized(ptrs[1], w_scale.GetTensorRawData(), in.type, n, k, st);
    }
    const LtPlan& plan = plan_for(in.type, fp8, m, k, n, ptrs, xs, ws, st);
    set_pointers(plan, ptrs);
    LtStatus s = matmul(plan, plan.pick, ptrs[1], ptrs[0], const_cast<void*>(ptrs[3]), st);
    if (s != 0)
      throw std::runtime_error(std::string("cublasLtMatmul (") + (fp8 ? "fp8" : "dequantized fp8") + ") of X " +
                               shape_str(xs) + " by W " + shape_str(ws) + " " + in.dtype + " failed: cuBLAS status " +
                               std::to_string(s));
  }

 private:
  void cpu(const void* x, const uint8_t* w, const float* w_scale, const void* b, void* y, ONNXTensorElementDataType t,
           int64_t m, int64_t k, int64_t n) const {
    std::vector<double> wd(static_cast<size_t>(k * n));  // (K, N): the e4m3 (N, K) rows times their scales
    for (int64_t j = 0; j < n; ++j)
      for (int64_t i = 0; i < k; ++i) wd[i * n + j] = e4m3(w[j * k + i]) * w_scale[j];
    // X's rows as kernels/fp8_quant_rows_triton.py writes them, times their scales
    std::vector<float> xq(static_cast<size_t>(m * k));
    for (int64_t r = 0; r < m; ++r) {
      float amax = 0.f;
      for (int64_t i = 0; i < k; ++i) amax = std::max(amax, std::fabs(load(x, t, r * k + i)));
      const float scale = amax > 0.f ? amax / 448.f : 1.f, inv = 1.f / scale;
      for (int64_t i = 0; i < k; ++i) {
        const float v = std::min(std::max(load(x, t, r * k + i) * inv, -448.f), 448.f);
        xq[r * k + i] = static_cast<float>(e4m3(to_e4m3(v)) * scale);
      }
    }
    linear_cpu(x, wd, b, y, t, m, k, n, gelu_, xq.data());
  }

  // W's dequantized (N, K) copy in X's type, on the GPU: made on the host the first time (and again only where W
  // is not a constant of the model, or the buffer moved), as the CPU path reads it.
  const void* dequantized(const void* w, const void* w_scale, ONNXTensorElementDataType t, int64_t n, int64_t k,
                          void* st) {
    const size_t count = static_cast<size_t>(n * k);
    void* buffer = reinterpret_cast<void*>(memory_.scratch(kDequantW, count * 2));
    if (w_constant_ && buffer == dequantized_ && w == dequantized_from_) return buffer;
    std::vector<uint8_t> wq(count);
    std::vector<float> scale(static_cast<size_t>(n));
    copy_now(wq.data(), w, count, true, st);
    copy_now(scale.data(), w_scale, scale.size() * sizeof(float), true, st);
    std::vector<uint16_t> host(count);
    for (int64_t j = 0; j < n; ++j)
      for (int64_t i = 0; i < k; ++i)
        store(host.data(), t, j * k + i, static_cast<float>(e4m3(wq[j * k + i]) * scale[j]));
    copy_now(buffer, host.data(), count * 2, false, st);
    dequantized_ = buffer, dequantized_from_ = w;
    return buffer;
  }

  void set_pointers(const LtPlan& plan, const void* const ptrs[6]) const {
    const CublasLt& lt = *plan.lt;
    lt.check(lt.DescSet(plan.desc, DESC_BIAS_POINTER, &ptrs[2], sizeof ptrs[2]), "setting the bias");
    if (!ptrs[4]) return;  // the dequantized path: no scales
    lt.check(lt.DescSet(plan.desc, DESC_A_SCALE_POINTER, &ptrs[4], sizeof ptrs[4]), "setting W's scales");
    lt.check(lt.DescSet(plan.desc, DESC_B_SCALE_POINTER, &ptrs[5], sizeof ptrs[5]), "setting X's scales");
  }

  // Row-major Y (M, N) = X (M, K) W (N, K)^T is column-major Y^T (N, M) = W (K, N col-major)^T X^T (K, M): cuBLASLt's
  // A is W transposed (fp8 wants "TN"), its B is X's e4m3 rows; A's scales run along N, B's along M. Without
  // `fp8`, the same product of the dequantized W and X in X's type, unscaled.
  const LtPlan& plan_for(ONNXTensorElementDataType type, bool fp8, int64_t m, int64_t k, int64_t n,
                          const void* const ptrs[6], const std::vector<int64_t>& xs, const std::vector<int64_t>& ws,
                          void* st) {
    const CublasLt& lt = cublas_lt();
    const auto key = std::make_tuple(m, k, n, fp8 ? 0u : alignment(ptrs[0]), alignment(ptrs[1]), alignment(ptrs[3]),
                                     alignment(ptrs[2]));
    auto found = plans_.find(key);
    if (found != plans_.end()) return *found->second;
    if (!handle_) lt.check(lt.Create(&handle_), "cublasLtCreate");
    const int32_t dt = type == ONNX_TENSOR_ELEMENT_DATA_TYPE_FLOAT16 ? R_16F : R_16BF;
    auto plan = std::make_unique<LtPlan>();
    plan->lt = &lt;
    lt.check(lt.DescCreate(&plan->desc, COMPUTE_32F, R_32F), "cublasLtMatmulDescCreate");
    const int32_t op_t = OP_T, op_n = OP_N, mode = SCALE_MODE_OUTER_VEC_32F;
    const uint32_t epilogue = gelu_ ? EPILOGUE_GELU_BIAS : EPILOGUE_BIAS;
    lt.check(lt.DescSet(plan->desc, DESC_TRANSA, &op_t, sizeof op_t), "setting transa");
    lt.check(lt.DescSet(plan->desc, DESC_TRANSB, &op_n, sizeof op_n), "setting transb");
    lt.check(lt.DescSet(plan->desc, DESC_EPILOGUE, &epilogue, sizeof epilogue), "setting the epilogue");
    lt.check(lt.DescSet(plan->desc, DESC_BIAS_DATA_TYPE, &dt, sizeof dt), "setting the bias type");
    if (fp8 && (lt.DescSet(plan->desc, DESC_A_SCALE_MODE, &mode, sizeof mode) ||
                lt.DescSet(plan->desc, DESC_B_SCALE_MODE, &mode, sizeof mode)))
      throw std::runtime_error(lt.path + " has no per-row fp8 scales (the outer-vector scale mode of cuBLAS 12.9+)");
    set_pointers(*plan, ptrs);
    const int32_t operands = fp8 ? R_8F_E4M3 : dt;
    lt.check(lt.LayoutCreate(&plan->a, operands, k, n, k), "cublasLtMatrixLayoutCreate(W)");
    lt.check(lt.LayoutCreate(&plan->b, operands, k, m, k), "cublasLtMatrixLayoutCreate(X)");
    lt.check(lt.LayoutCreate(&plan->d, dt, n, m, n), "cublasLtMatrixLayoutCreate(Y)");
    const uint32_t aligns[] = {std::get<4>(key), fp8 ? 256u : std::get<3>(key), std::get<5>(key), std::get<5>(key)};
    choose_algo(handle_, *plan, aligns, st, [&](size_t bytes) { memory_.scratch(kLtWorkspace, bytes); },
                [&](const LtHeuristic& h) {
                  return matmul(*plan, h, ptrs[1], ptrs[0], const_cast<void*>(ptrs[3]), st);
                },
                (fp8 ? "fp8 X " : "X ") + shape_str(xs) + " by W " + shape_str(ws) +
                    (fp8 ? " on this GPU (fp8 tensor cores start at sm_89)" : " (W dequantized from fp8)"));
    return *(plans_[key] = std::move(plan));
  }

  const bool dequantize_ = dequantize_asked();  // read when the session makes the node
  int capability_ = 0;  // the GPU's, sm_XY as XY
  bool w_constant_ = false;  // W is an initializer: its dequantized copy is made once
  const void* dequantized_ = nullptr;  // that copy, and the W it was made from
  const void* dequantized_from_ = nullptr;

};

// Y is X's shape with W's N last: W is (N, K) here.
OrtStatusPtr fp8_linear_shape(const OrtCustomOp*, OrtShapeInferContext* ctx) {
  return shape_n_from_w(ctx, 0, "tritonforge_fp8_linear_n");
}

struct Fp8LinearOp : TypedOp<Fp8LinearOp, Fp8LinearKernel> {
  Fp8LinearOp(bool cuda, ONNXTensorElementDataType type) : TypedOp(cuda, type) {
    InferOutputShapeFn = fp8_linear_shape;
  }
  const char* GetName() const { return "Fp8Linear"; }
  size_t GetInputTypeCount() const { return 4; }
  size_t GetOutputTypeCount() const { return 1; }
  ONNXTensorElementDataType GetInputType(size_t i) const {
    return i == 1 ? kE4M3 : i == 2 ? ONNX_TENSOR_ELEMENT_DATA_TYPE_FLOAT : type_;
  }
};

}  // namespace

std::vector<OrtCustomOp*> fp8_linear_ops(bool cuda) { return typed_ops<Fp8LinearOp>(cuda); }

}  // namespace tf
