// BiasConcat: two token streams joined on their sequence axis, each with its Linear's bias added, in one node:
// Y = Concat(A + bias_a, B + bias_b, axis 1) (SD3's and Flux's joint attention over image and text tokens, the
// streams' projections made by MatMuls without their biases). kernels/bias_concat_triton.py on CUDA, plain C++
// in double on the CPU.
//
// Inputs: A (N, Sa, C), B (N, Sb, C), bias_a and bias_b (C), one element type (float, float16 or bfloat16).
// Output: Y (N, Sa + Sb, C) of that type.
#include "op_base.h"

namespace tf {
namespace {

class BiasConcatKernel : public KernelBase {
 public:
  BiasConcatKernel(const OrtKernelInfo* info, bool cuda) : KernelBase(info, "BiasConcat", cuda) {}

 protected:
  void Compute(Ort::KernelContext& ctx) override {
    auto a = ctx.GetInput(0), b = ctx.GetInput(1), bias_a = ctx.GetInput(2), bias_b = ctx.GetInput(3);
    const Input in = input_x(a);
    const std::vector<int64_t>& as = in.shape;
    const auto bs = b.GetTensorTypeAndShapeInfo().GetShape();
    if (as.size() != 3) bad("input A has shape " + shape_str(as) + "; expected (items, tokens, channels)");
    if (float_type(b, "B") != in.dtype) bad("input B's element type differs from A's");
    if (bs.size() != 3 || bs[0] != as[0] || bs[2] != as[2])
      bad("input B has shape " + shape_str(bs) + "; expected A's items and channels, (" + std::to_string(as[0]) +
          ", tokens, " + std::to_string(as[2]) + ")");
    const int64_t c = as[2];
    for (auto [v, name] : {std::pair{&bias_a, "bias_a"}, std::pair{&bias_b, "bias_b"}}) {
      if (float_type(*v, name) != in.dtype) bad(std::string("input ") + name + "'s element type differs from A's");
      auto shape = v->GetTensorTypeAndShapeInfo().GetShape();
      if (product(shape) != c || (!shape.empty() && shape.back() != c))
        bad(std::string("input ") + name + " has shape " + shape_str(shape) + "; expected (" + std::to_string(c) +
            ")");
    }
    const int64_t items = as[0], sa = as[1], sb = bs[1], rows = items * (sa + sb);
    auto y = ctx.GetOutput(0, {items, sa + sb, c});
    if (rows * c == 0) return;
    if (!cuda_) {
      for (int64_t r = 0; r < rows; ++r) {
        const int64_t item = r / (sa + sb), s = r % (sa + sb);
        const bool first = s < sa;
        const void* src = first ? a.GetTensorRawData() : b.GetTensorRawData();
        const void* bias = first ? bias_a.GetTensorRawData() : bias_b.GetTensorRawData();
        const int64_t at = (first ? item * sa + s : item * sb + s - sa) * c;
        for (int64_t j = 0; j < c; ++j)
          store(y.GetTensorMutableRawData(), in.type, r * c + j,
                static_cast<float>(static_cast<double>(load(src, in.type, at + j)) + load(bias, in.type, j)));
      }
      return;
    }
    if (c > INT32_MAX) bad("A has " + std::to_string(c) + " channels, past the kernels' i32");
    RoleValues r;
    r.u[R_OUT] = reinterpret_cast<uint64_t>(y.GetTensorMutableRawData());
    r.u[R_IN] = reinterpret_cast<uint64_t>(a.GetTensorRawData());
    r.u[R_IN_B] = reinterpret_cast<uint64_t>(b.GetTensorRawData());
    r.u[R_BIAS] = reinterpret_cast<uint64_t>(bias_a.GetTensorRawData());
    r.u[R_BIAS_B] = reinterpret_cast<uint64_t>(bias_b.GetTensorRawData());
    r.u[R_BATCH] = static_cast<uint64_t>(rows);
    r.u[R_N_COLS] = static_cast<uint64_t>(c);
    r.u[R_SEQ_A] = static_cast<uint64_t>(sa);
    r.u[R_SEQ_B] = static_cast<uint64_t>(sb);
    Problem p;
    p.batch = rows, p.n_cols = c;
    run(OP_BIAS_CONCAT, in.dtype, 0, p, r, "bias_concat_" + in.dtype,
        std::to_string(items) + "_" + std::to_string(sa) + "_" + std::to_string(sb) + "_" + std::to_string(c),
        memory_, stream(ctx), [&] { return where("A " + shape_str(as) + ", B " + shape_str(bs) + " " + in.dtype); });
  }
};

// The output is not A's shape: ORT takes it from the kernel (no shape inference). Every input has the model's one
// element type.
struct BiasConcatOp : TypedOp<BiasConcatOp, BiasConcatKernel> {
  BiasConcatOp(bool cuda, ONNXTensorElementDataType type) : TypedOp(cuda, type) { InferOutputShapeFn = nullptr; }
  const char* GetName() const { return "BiasConcat"; }
  size_t GetInputTypeCount() const { return 4; }
  size_t GetOutputTypeCount() const { return 1; }
};

}  // namespace

std::vector<OrtCustomOp*> bias_concat_ops(bool cuda) { return typed_ops<BiasConcatOp>(cuda); }

}  // namespace tf
