// GroupNorm and SkipGroupNorm (NHWC, com.microsoft.GroupNorm's and SkipGroupNorm's interfaces) and ONNX's
// GroupNormalization (NCHW), each with an optional SiLU: kernels/group_norm*_triton.py on CUDA, plain C++
// with double-precision statistics on the CPU.
#include "op_base.h"

namespace tf {
namespace {

// ---- GroupNorm / SkipGroupNorm, NHWC ----------------------------------------------------------
class GroupNormNHWC : public KernelBase {
 public:
  GroupNormNHWC(const OrtKernelInfo* info, const char* op, bool cuda, bool skip)
      : KernelBase(info, op, cuda), skip_op_(skip) {
    groups_ = attr_int(info, "groups", 0, true, op);
    silu_ = attr_int(info, "activation", 0, false, op);
    eps_ = attr_float(info, "epsilon", 1e-5f);
    int64_t channels_last = attr_int(info, "channels_last", 1, false, op);
    if (groups_ < 1) throw Ort::Exception(where("groups must be at least 1"), ORT_INVALID_ARGUMENT);
    if (silu_ != 0 && silu_ != 1)
      throw Ort::Exception(where("activation must be 0 (none) or 1 (SiLU)"), ORT_INVALID_ARGUMENT);
    if (channels_last != 1)
      throw Ort::Exception(where("only channels_last=1 (NHWC) is supported"), ORT_INVALID_ARGUMENT);
  }

 protected:
  void Compute(Ort::KernelContext& ctx) override {
    auto x = ctx.GetInput(0), gamma = ctx.GetInput(1), beta = ctx.GetInput(2);
    const Input in = input_x(x);
    const std::string& dt = in.dtype;
    const ONNXTensorElementDataType et = in.type;
    const std::vector<int64_t>& xs = in.shape;
    if (xs.size() != 4) bad("input X has shape " + shape_str(xs) + "; expected rank 4 (N, H, W, C)");
    int64_t n = xs[0], hw = xs[1] * xs[2], c = xs[3];
    check_groups(c, groups_);
    for (auto* v : {&gamma, &beta})
      per_channel_floats(*v, v == &gamma ? "gamma" : "beta", c, " (tritonforge.rewrite converts float16 initializers)",
                         "");
    Ort::ConstValue skip{nullptr}, bias{nullptr};
    bool broadcast = false;
    if (skip_op_) {
      skip = ctx.GetInput(3);
      if (!skip) bad("input skip is required");
      if (ctx.GetInputCount() > 4) bias = ctx.GetInput(4);
      auto ss = skip.GetTensorTypeAndShapeInfo().GetShape();
      if (float_type(skip, "skip") != dt) bad("input skip's element type differs from X's");
      if (ss == xs) broadcast = false;
      else if ((ss.size() == 4 && ss[0] == n && ss[1] == 1 && ss[2] == 1 && ss[3] == c) ||
               (ss.size() == 2 && ss[0] == n && ss[1] == c))
        broadcast = true;
      else
        bad("input skip has shape " + shape_str(ss) + "; expected " + shape_str(xs) + ", (N, 1, 1, C) or (N, C)");
      if (bias) {
        if (float_type(bias, "bias") != dt) bad("input bias's element type differs from X's");
        if (bias.GetTensorTypeAndShapeInfo().GetElementCount() != static_cast<size_t>(c))
          bad("input bias has shape " + shape_str(bias.GetTensorTypeAndShapeInfo().GetShape()) + "; expected (" +
              std::to_string(c) + ")");
      }
    }
    auto y = ctx.GetOutput(0, xs);
    Ort::UnownedValue s{nullptr};
    if (skip_op_ && ctx.GetOutputCount() > 1) s = ctx.GetOutput(1, xs);
    if (n * hw * c == 0) return;
    if (!cuda_) {
      cpu(et, x.GetTensorRawData(), skip ? skip.GetTensorRawData() : nullptr,
          bias ? bias.GetTensorRawData() : nullptr, gamma.GetTensorData<float>(), beta.GetTensorData<float>(),
          y.GetTensorMutableRawData(), s ? s.GetTensorMutableRawData() : nullptr, n, hw, c, broadcast);
      return;
    }
    RoleValues r;
    r.u[R_IN] = reinterpret_cast<uint64_t>(x.GetTensorRawData());
    r.u[R_OUT] = reinterpret_cast<uint64_t>(y.GetTensorMutableRawData());
    r.u[R_GAMMA] = reinterpret_cast<uint64_t>(gamma.GetTensorRawData());
    r.u[R_BETA] = reinterpret_cast<uint64_t>(beta.GetTensorRawData());
    if (skip) {
      r.u[R_SKIP] = reinterpret_cast<uint64_t>(skip.GetTensorRawData());
      // the kernels write x + skip + bias to add_out; a node without that output gets a buffer of its own
      r.u[R_ADD_OUT] = s ? reinterpret_cast<uint64_t>(s.GetTensorMutableRawData())
                         : memory_.scratch(-1, static_cast<size_t>(n * hw * c) * (dt == "fp32" ? 4 : 2));
    }
    if (bias) r.u[R_BIAS] = reinterpret_cast<uint64_t>(bias.GetTensorRawData());
    r.u[R_HW] = hw;
    r.u[R_C] = c;
    r.u[R_C_PER_GROUP] = c / groups_;
    r.u[R_GROUPS] = groups_;
    r.f[R_EPS] = eps_;
    r.u[R_HAS_SKIP] = skip ? 1 : 0;
    r.u[R_HAS_BIAS] = bias ? 1 : 0;
    r.u[R_BROADCAST_SKIP] = broadcast;
    Problem p;
    p.n = n, p.hw = hw, p.c = c, p.groups = groups_, p.c_per_group = c / groups_, p.silu = silu_;
    std::string sig = std::to_string(n) + "_" + std::to_string(hw) + "_" + std::to_string(c) + "_" +
                      std::to_string(groups_) + (silu_ ? "_silu" : "_pass") + (skip ? "_skip" : "_noskip") +
                      (broadcast ? "_broadcast" : "_nobroadcast") + (bias ? "_bias" : "_nobias");
    run(OP_GROUP_NORM_NHWC, dt, static_cast<int>(silu_), p, r, std::string("group_norm_") +
        (silu_ ? "silu_" : "pass_") + dt, sig, memory_, stream(ctx), [&] { return where("X " + shape_str(xs) + " " + dt); });
  }

  void cpu(ONNXTensorElementDataType t, const void* x, const void* skip, const void* bias, const float* gamma,
           const float* beta, void* y, void* s, int64_t n, int64_t hw, int64_t c, bool broadcast) const {
    int64_t cpg = c / groups_;
    std::vector<float> v(static_cast<size_t>(hw * cpg));
    for (int64_t img = 0; img < n; ++img) {
      for (int64_t g = 0; g < groups_; ++g) {
        double sum = 0;
        for (int64_t p = 0; p < hw; ++p) {
          for (int64_t j = 0; j < cpg; ++j) {
            int64_t ch = g * cpg + j, i = (img * hw + p) * c + ch;
            float val = load(x, t, i);
            if (skip) val += load(skip, t, broadcast ? img * c + ch : i);
            if (bias) val += load(bias, t, ch);
            if (s) store(s, t, i, val);
            v[p * cpg + j] = val;
            sum += val;
          }
        }
        double mean = sum / static_cast<double>(hw * cpg), var = 0;
        for (float val : v) var += (val - mean) * (val - mean);
        double rstd = 1.0 / std::sqrt(var / static_cast<double>(hw * cpg) + eps_);
        for (int64_t p = 0; p < hw; ++p) {
          for (int64_t j = 0; j < cpg; ++j) {
            int64_t ch = g * cpg + j;
            double out = (v[p * cpg + j] - mean) * rstd * gamma[ch] + beta[ch];
            if (silu_) out = out / (1.0 + std::exp(-out));
            store(y, t, (img * hw + p) * c + ch, static_cast<float>(out));
          }
        }
      }
    }
  }

  bool skip_op_;
  int64_t groups_, silu_;
  float eps_;
};


// ---- GroupNormalization, NCHW (ONNX's; scale and bias per channel, float) ----------------------
class GroupNormNCHW : public KernelBase {
 public:
  GroupNormNCHW(const OrtKernelInfo* info, bool cuda) : KernelBase(info, "GroupNormalization", cuda) {
    groups_ = attr_int(info, "num_groups", 0, true, "GroupNormalization");
    silu_ = attr_int(info, "activation", 0, false, "GroupNormalization");
    eps_ = attr_float(info, "epsilon", 1e-5f);
    if (groups_ < 1) throw Ort::Exception(where("num_groups must be at least 1"), ORT_INVALID_ARGUMENT);
    if (silu_ != 0 && silu_ != 1)
      throw Ort::Exception(where("activation must be 0 (none) or 1 (SiLU)"), ORT_INVALID_ARGUMENT);
  }

 protected:
  void Compute(Ort::KernelContext& ctx) override {
    auto x = ctx.GetInput(0), scale = ctx.GetInput(1), bias = ctx.GetInput(2);
    const Input in = input_x(x);
    const std::string& dt = in.dtype;
    const ONNXTensorElementDataType et = in.type;
    const std::vector<int64_t>& xs = in.shape;
    if (xs.size() < 3) bad("input X has shape " + shape_str(xs) + "; expected (N, C, D1, ...), rank 3 or more");
    int64_t n = xs[0], c = xs[1], hw = product(xs, 2);
    check_groups(c, groups_);
    for (auto* v : {&scale, &bias})
      per_channel_floats(*v, v == &scale ? "scale" : "bias", c, ", one value per channel", ", one value per channel");
    auto y = ctx.GetOutput(0, xs);
    if (n * c * hw == 0) return;
    if (!cuda_) {
      cpu(et, x.GetTensorRawData(), scale.GetTensorData<float>(), bias.GetTensorData<float>(),
          y.GetTensorMutableRawData(), n, c, hw);
      return;
    }
    RoleValues r;
    r.u[R_IN] = reinterpret_cast<uint64_t>(x.GetTensorRawData());
    r.u[R_OUT] = reinterpret_cast<uint64_t>(y.GetTensorMutableRawData());
    r.u[R_NCHW_SCALE] = reinterpret_cast<uint64_t>(scale.GetTensorRawData());
    r.u[R_NCHW_BIAS] = reinterpret_cast<uint64_t>(bias.GetTensorRawData());
    r.u[R_HW] = hw;
    r.u[R_C] = c;
    r.u[R_C_PER_GROUP] = c / groups_;
    r.u[R_GROUPS] = groups_;
    r.f[R_EPS] = eps_;
    Problem p;
    p.n = n, p.hw = hw, p.c = c, p.groups = groups_, p.c_per_group = c / groups_, p.silu = silu_;
    std::string sig = std::to_string(n) + "_" + std::to_string(hw) + "_" + std::to_string(c) + "_" +
                      std::to_string(groups_);
    run(OP_GROUP_NORM_NCHW, dt, static_cast<int>(silu_), p, r, std::string("group_norm_nchw_") +
        (silu_ ? "silu_" : "pass_") + dt, sig, memory_, stream(ctx), [&] { return where("X " + shape_str(xs) + " " + dt); });
  }

  void cpu(ONNXTensorElementDataType t, const void* x, const float* scale, const float* bias, void* y, int64_t n,
           int64_t c, int64_t hw) const {
    int64_t cpg = c / groups_, span = cpg * hw;
    for (int64_t img = 0; img < n; ++img) {
      for (int64_t g = 0; g < groups_; ++g) {
        int64_t base = (img * groups_ + g) * span;
        double sum = 0, var = 0;
        for (int64_t i = 0; i < span; ++i) sum += load(x, t, base + i);
        double mean = sum / static_cast<double>(span);
        for (int64_t i = 0; i < span; ++i) {
          double d = load(x, t, base + i) - mean;
          var += d * d;
        }
        double rstd = 1.0 / std::sqrt(var / static_cast<double>(span) + eps_);
        for (int64_t i = 0; i < span; ++i) {
          int64_t ch = g * cpg + i / hw;
          double out = (load(x, t, base + i) - mean) * rstd * scale[ch] + bias[ch];
          if (silu_) out = out / (1.0 + std::exp(-out));
          store(y, t, base + i, static_cast<float>(out));
        }
      }
    }
  }

  int64_t groups_, silu_;
  float eps_;
};

struct GroupNormOp : OpBase<GroupNormOp, GroupNormNHWC> {
  using OpBase::OpBase;
  const char* GetName() const { return "GroupNorm"; }
  TF_IO(3, 1)
  ONNXTensorElementDataType GetInputType(size_t i) const {
    return i == 0 ? ONNX_TENSOR_ELEMENT_DATA_TYPE_UNDEFINED : ONNX_TENSOR_ELEMENT_DATA_TYPE_FLOAT;
  }
  GroupNormNHWC* Make(const OrtKernelInfo* info) const { return new GroupNormNHWC(info, "GroupNorm", cuda_, false); }
};

// X, skip and bias share one element type, which the model gives; gamma and beta are float.
struct SkipGroupNormOp : TypedOp<SkipGroupNormOp, GroupNormNHWC> {
  using TypedOp::TypedOp;
  const char* GetName() const { return "SkipGroupNorm"; }
  size_t GetInputTypeCount() const { return 5; }
  size_t GetOutputTypeCount() const { return 2; }
  ONNXTensorElementDataType GetInputType(size_t i) const {
    return i == 1 || i == 2 ? ONNX_TENSOR_ELEMENT_DATA_TYPE_FLOAT : type_;
  }
  OrtCustomOpInputOutputCharacteristic GetInputCharacteristic(size_t i) const {
    return i == 4 ? INPUT_OUTPUT_OPTIONAL : INPUT_OUTPUT_REQUIRED;
  }
  OrtCustomOpInputOutputCharacteristic GetOutputCharacteristic(size_t i) const {
    return i == 1 ? INPUT_OUTPUT_OPTIONAL : INPUT_OUTPUT_REQUIRED;
  }
  GroupNormNHWC* Make(const OrtKernelInfo* info) const {
    return new GroupNormNHWC(info, "SkipGroupNorm", cuda_, true);
  }
};

struct GroupNormalizationOp : OpBase<GroupNormalizationOp, GroupNormNCHW> {
  using OpBase::OpBase;
  const char* GetName() const { return "GroupNormalization"; }
  TF_IO(3, 1)
  ONNXTensorElementDataType GetInputType(size_t i) const {
    return i == 0 ? ONNX_TENSOR_ELEMENT_DATA_TYPE_UNDEFINED : ONNX_TENSOR_ELEMENT_DATA_TYPE_FLOAT;
  }
  GroupNormNCHW* Make(const OrtKernelInfo* info) const { return new GroupNormNCHW(info, cuda_); }
};

}  // namespace

std::vector<OrtCustomOp*> group_norm_ops(bool cuda) {
  static GroupNormOp group_norm[2] = {GroupNormOp(false), GroupNormOp(true)};
  static GroupNormalizationOp nchw[2] = {GroupNormalizationOp(false), GroupNormalizationOp(true)};
  std::vector<OrtCustomOp*> ops = typed_ops<SkipGroupNormOp>(cuda);
  ops.insert(ops.begin(), &group_norm[cuda]);
  ops.push_back(&nchw[cuda]);
  return ops;
}

}  // namespace tf
