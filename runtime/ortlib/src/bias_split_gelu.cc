// BiasSplitGelu: a UNet MLP's GEGLU after its Linear, with that Linear's bias, as one node:
// Y = (X[..., :h] + bias[:h]) * gelu(X[..., h:] + bias[h:]), the exact (erf) GELU, h half of X's last dim
// (com.microsoft.BiasSplitGelu's interface, any even width, every float type). kernels/bias_split_gelu_triton.py on
// CUDA, plain C++ in double on the CPU.
//
// Inputs: X (..., 2h), bias (2h), one element type (float, float16 or bfloat16). Output: Y (..., h) of that type.
#include "op_base.h"

namespace tf {
namespace {

class BiasSplitGeluKernel : public KernelBase {
 public:
  BiasSplitGeluKernel(const OrtKernelInfo* info, bool cuda) : KernelBase(info, "BiasSplitGelu", cuda) {}

 protected:
  void Compute(Ort::KernelContext& ctx) override {
    auto x = ctx.GetInput(0), bias = ctx.GetInput(1);
    const Input in = input_x(x);
    const std::vector<int64_t>& xs = in.shape;
    if (xs.empty() || xs.back() % 2)
      bad("input X has shape " + shape_str(xs) + "; expected (..., 2h), an even last dim to split in halves");
    const int64_t width = xs.back(), half = width / 2, rows = product(xs, 0, xs.size() - 1);
    if (float_type(bias, "bias") != in.dtype) bad("input bias's element type differs from X's");
    const auto bs = bias.GetTensorTypeAndShapeInfo().GetShape();
    if (product(bs) != width || (!bs.empty() && bs.back() != width))
      bad("input bias has shape " + shape_str(bs) + "; expected (" + std::to_string(width) + "), X's last dim");
    std::vector<int64_t> ys = xs;
    ys.back() = half;
    auto y = ctx.GetOutput(0, ys);
    if (rows * half == 0) return;
    if (!cuda_) {
      const void *xp = x.GetTensorRawData(), *bp = bias.GetTensorRawData();
      void* yp = y.GetTensorMutableRawData();
      for (int64_t r = 0; r < rows; ++r) {
        for (int64_t j = 0; j < half; ++j) {
          const double value = static_cast<double>(load(xp, in.type, r * width + j)) + load(bp, in.type, j);
          const double gate =
              static_cast<double>(load(xp, in.type, r * width + half + j)) + load(bp, in.type, half + j);
          const double gelu = 0.5 * gate * (1 + std::erf(gate * 0.7071067811865476));
          store(yp, in.type, r * half + j, static_cast<float>(value * gelu));
        }
      }
      return;
    }
    if (half > INT32_MAX / 2) bad("X has " + std::to_string(width) + " values a row, past the kernels' i32");
    RoleValues r;
    r.u[R_OUT] = reinterpret_cast<uint64_t>(y.GetTensorMutableRawData());
    r.u[R_IN] = reinterpret_cast<uint64_t>(x.GetTensorRawData());
    r.u[R_BIAS] = reinterpret_cast<uint64_t>(bias.GetTensorRawData());
    r.u[R_BATCH] = static_cast<uint64_t>(rows);
    r.u[R_N_COLS] = static_cast<uint64_t>(half);
    Problem p;
    p.batch = rows, p.n_cols = half;
    run(OP_BIAS_SPLIT_GELU, in.dtype, 0, p, r, "bias_split_gelu_" + in.dtype,
        std::to_string(rows) + "_" + std::to_string(half), memory_, stream(ctx),
        [&] { return where("X " + shape_str(xs) + " " + in.dtype); });
  }
};

// The output is not X's shape: ORT takes it from the kernel (no shape inference). Every input has the model's one
// element type.
struct BiasSplitGeluOp : TypedOp<BiasSplitGeluOp, BiasSplitGeluKernel> {
  BiasSplitGeluOp(bool cuda, ONNXTensorElementDataType type) : TypedOp(cuda, type) { InferOutputShapeFn = nullptr; }
  const char* GetName() const { return "BiasSplitGelu"; }
  size_t GetInputTypeCount() const { return 2; }
  size_t GetOutputTypeCount() const { return 1; }
};

}  // namespace

std::vector<OrtCustomOp*> bias_split_gelu_ops(bool cuda) { return typed_ops<BiasSplitGeluOp>(cuda); }

}  // namespace tf
