// Softmax and LogSoftmax over the last axis: kernels/softmax*_triton.py on CUDA, plain C++ in double on the
// CPU.
#include "op_base.h"

namespace tf {
namespace {

// ---- Softmax / LogSoftmax over the last axis --------------------------------------------------
class SoftmaxLast : public KernelBase {
 public:
  SoftmaxLast(const OrtKernelInfo* info, const char* op, bool cuda, bool log)
      : KernelBase(info, op, cuda), log_(log) {
    axis_ = attr_int(info, "axis", -1, false, op);
  }

 protected:
  void Compute(Ort::KernelContext& ctx) override {
    auto x = ctx.GetInput(0);
    const Input in = input_x(x);
    const std::string& dt = in.dtype;
    const ONNXTensorElementDataType et = in.type;
    const std::vector<int64_t>& xs = in.shape;
    int64_t rank = static_cast<int64_t>(xs.size());
    if (rank < 1) bad("input X is a scalar; softmax needs an axis");
    if (axis_ != -1 && axis_ != rank - 1)
      bad("axis " + std::to_string(axis_) + " of X " + shape_str(xs) + " is not the last; only the last axis runs");
    auto y = ctx.GetOutput(0, xs);
    int64_t cols = xs.back(), rows = product(xs, 0, xs.size() - 1);
    if (rows * cols == 0) return;
    if (!cuda_) {
      const void* in = x.GetTensorRawData();
      void* out = y.GetTensorMutableRawData();
      for (int64_t r = 0; r < rows; ++r) {
        double m = -INFINITY, s = 0;
        for (int64_t j = 0; j < cols; ++j) m = std::max<double>(m, load(in, et, r * cols + j));
        for (int64_t j = 0; j < cols; ++j) s += std::exp(load(in, et, r * cols + j) - m);
        for (int64_t j = 0; j < cols; ++j) {
          double v = load(in, et, r * cols + j) - m;
          store(out, et, r * cols + j, static_cast<float>(log_ ? v - std::log(s) : std::exp(v) / s));
        }
      }
      return;
    }
    RoleValues r;
    r.u[R_IN] = reinterpret_cast<uint64_t>(x.GetTensorRawData());
    r.u[R_OUT] = reinterpret_cast<uint64_t>(y.GetTensorMutableRawData());
    r.u[R_IN_STRIDE] = r.u[R_OUT_STRIDE] = cols;
    r.u[R_N_COLS] = cols;
    r.u[R_BATCH] = rows;
    Problem p;
    p.batch = rows, p.n_cols = cols, p.in_stride = p.out_stride = cols;
    run(log_ ? OP_LOG_SOFTMAX : OP_SOFTMAX, dt, -1, p, r, std::string(log_ ? "log_softmax_" : "softmax_") + dt,
        std::to_string(rows) + "_" + std::to_string(cols), memory_, stream(ctx),
        [&] { return where("X " + shape_str(xs) + " " + dt); });
  }

  bool log_;
  int64_t axis_;
};

template <bool Log>
struct SoftmaxOp : OpBase<SoftmaxOp<Log>, SoftmaxLast> {
  using OpBase<SoftmaxOp<Log>, SoftmaxLast>::OpBase;
  const char* GetName() const { return Log ? "LogSoftmax" : "Softmax"; }
  TF_IO(1, 1)
  ONNXTensorElementDataType GetInputType(size_t) const { return ONNX_TENSOR_ELEMENT_DATA_TYPE_UNDEFINED; }
  SoftmaxLast* Make(const OrtKernelInfo* info) const { return new SoftmaxLast(info, GetName(), this->cuda_, Log); }
};

}  // namespace

std::vector<OrtCustomOp*> softmax_ops(bool cuda) {
  static SoftmaxOp<false> softmax[2] = {SoftmaxOp<false>(false), SoftmaxOp<false>(true)};
  static SoftmaxOp<true> log_softmax[2] = {SoftmaxOp<true>(false), SoftmaxOp<true>(true)};
  return {&softmax[cuda], &log_softmax[cuda]};
}

}  // namespace tf
