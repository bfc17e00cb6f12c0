// AdaLayerNorm: the diffusion transformers' block norm in one node. LayerNorm over the last axis without an
// affine, modulated per item, Y = LN(S) * (1 + scale) + shift, where S is X, or X + gate * (branch + bias)
// when the node has those inputs (the gated residual before the norm, the branch a Linear's output whose bias,
// when given, is added here; S is then the second output, the residual the next block reads), S clipped to
// [clip_min, clip_max] where the node says so (Flux clips its fp16 residual stream to fp16's range).
// kernels/ada_layer_norm_triton.py on CUDA, plain C++ in double on the CPU.
//
// Inputs: X (..., rows_per_item, C) of N items; scale, shift [, gate]: one row of C per item, (N, C) or
// (N, 1, C), or one row for all; branch: X's shape; bias: (C). Every input and output has X's element type.
#include "op_base.h"

namespace tf {
namespace {

class AdaLayerNormKernel : public KernelBase {
 public:
  AdaLayerNormKernel(const OrtKernelInfo* info, bool cuda) : KernelBase(info, "AdaLayerNorm", cuda) {
    eps_ = attr_float(info, "epsilon", 1e-6f);
    clip_lo_ = attr_float(info, "clip_min", -INFINITY);
    clip_hi_ = attr_float(info, "clip_max", INFINITY);
    if (!(clip_lo_ <= clip_hi_))
      throw Ort::Exception(std::string(kDomain) + ".AdaLayerNorm: clip_min " + std::to_string(clip_lo_) +
                               " is above clip_max " + std::to_string(clip_hi_), ORT_INVALID_ARGUMENT);
    clipped_ = clip_lo_ != -INFINITY || clip_hi_ != INFINITY;
  }

 protected:
  // A per-item input (scale, shift, gate): its item count (1, or X's items), or a bad-input error naming it.
  int64_t items_of(const Ort::ConstValue& v, const char* name, const std::string& dt, int64_t c,
                   int64_t items) const {
    if (float_type(v, name) != dt) bad(std::string("input ") + name + "'s element type differs from X's");
    auto shape = v.GetTensorTypeAndShapeInfo().GetShape();
    // counted in rows, not elements over c: a 0-wide X (c = 0) has rows of no elements, and no division by c
    const int64_t rows = shape.empty() ? 0 : product(shape, 0, shape.size() - 1);
    if (shape.empty() || shape.back() != c || (rows != 1 && rows != items))
      bad(std::string("input ") + name + " has shape " + shape_str(shape) + "; expected one row of " +
          std::to_string(c) + " per item of X (" + std::to_string(items) + "), or one for all");
    return rows;
  }

  void Compute(Ort::KernelContext& ctx) override {
    auto x = ctx.GetInput(0), scale = ctx.GetInput(1), shift = ctx.GetInput(2);
    const Input in = input_x(x);
    const std::string& dt = in.dtype;
    const std::vector<int64_t>& xs = in.shape;
    if (xs.size() < 2) bad("input X has shape " + shape_str(xs) + "; expected (..., tokens, channels)");
    // items: X's dims before (tokens, channels); each item's tokens share its row of scale, shift and gate
    const int64_t c = xs.back(), rows = product(xs, 0, xs.size() - 1), x_items = product(xs, 0, xs.size() - 2);
    Ort::ConstValue branch{nullptr}, gate{nullptr}, bias{nullptr};
    if (ctx.GetInputCount() > 3) branch = ctx.GetInput(3);
    if (ctx.GetInputCount() > 4) gate = ctx.GetInput(4);
    if (ctx.GetInputCount() > 5) bias = ctx.GetInput(5);
    const bool gated = static_cast<bool>(branch);
    if (gated != static_cast<bool>(gate)) bad("inputs branch and gate come together: one is missing");
    if (bias && !gated) bad("input bias is the branch's: it needs the inputs branch and gate");
    if (clipped_ && !gated)
      bad("clip_min and clip_max bound the gated residual's sum: they need the inputs branch and gate");
    const int64_t items = items_of(scale, "scale", dt, c, x_items);
    if (items_of(shift, "shift", dt, c, x_items) != items) bad("inputs scale and shift hold different item counts");
    if (gated) {
      if (float_type(branch, "branch") != dt) bad("input branch's element type differs from X's");
      if (branch.GetTensorTypeAndShapeInfo().GetShape() != xs)
        bad("input branch has shape " + shape_str(branch.GetTensorTypeAndShapeInfo().GetShape()) + "; expected X's " +
            shape_str(xs));
      if (items_of(gate, "gate", dt, c, x_items) != items) bad("inputs gate and scale hold different item counts");
      if (bias) {
        if (float_type(bias, "bias") != dt) bad("input bias's element type differs from X's");
        auto bs = bias.GetTensorTypeAndShapeInfo().GetShape();
        if (product(bs) != c || (!bs.empty() && bs.back() != c))
          bad("input bias has shape " + shape_str(bs) + "; expected one row of " + std::to_string(c));
      }
    }
    auto y = ctx.GetOutput(0, xs);
    Ort::UnownedValue sum{nullptr};
    if (ctx.GetOutputCount() > 1) {
      if (!gated) bad("output 2 (the sum X + gate * branch) needs the inputs branch and gate");
      sum = ctx.GetOutput(1, xs);
    }
    if (rows * c == 0) return;
    const int64_t per_item = items == 1 ? rows : rows / x_items;
    if (!cuda_) {
      cpu(in.type, x.GetTensorRawData(), scale.GetTensorRawData(), shift.GetTensorRawData(),
          gated ? branch.GetTensorRawData() : nullptr, gated ? gate.GetTensorRawData() : nullptr,
          bias ? bias.GetTensorRawData() : nullptr, y.GetTensorMutableRawData(),
          sum ? sum.GetTensorMutableRawData() : nullptr, rows, c, per_item);
      return;
    }
    if (per_item > INT32_MAX) bad("X has " + std::to_string(per_item) + " rows per item, past the kernels' i32");
    const size_t bytes = static_cast<size_t>(rows * c) * (dt == "fp32" ? 4 : 2);
    RoleValues r;
    r.u[R_IN] = reinterpret_cast<uint64_t>(x.GetTensorRawData());
    r.u[R_OUT] = reinterpret_cast<uint64_t>(y.GetTensorMutableRawData());
    r.u[R_MOD_SCALE] = reinterpret_cast<uint64_t>(scale.GetTensorRawData());
    r.u[R_MOD_SHIFT] = reinterpret_cast<uint64_t>(shift.GetTensorRawData());
    if (gated) {
      r.u[R_SKIP] = reinterpret_cast<uint64_t>(branch.GetTensorRawData());
      r.u[R_GATE] = reinterpret_cast<uint64_t>(gate.GetTensorRawData());
      // the kernels write the sum; a node without that output gets a buffer of its own
      r.u[R_ADD_OUT] = sum ? reinterpret_cast<uint64_t>(sum.GetTensorMutableRawData()) : memory_.scratch(-1, bytes);
      if (bias) r.u[R_BIAS] = reinterpret_cast<uint64_t>(bias.GetTensorRawData());
    }
    r.u[R_N_COLS] = static_cast<uint64_t>(c);
    r.u[R_ROWS_PER_ITEM] = static_cast<uint64_t>(per_item);
    r.u[R_BATCH] = static_cast<uint64_t>(rows);
    r.f[R_EPS] = eps_;
    r.f[R_CLIP_LO] = clip_lo_;
    r.f[R_CLIP_HI] = clip_hi_;
    Problem p;
    p.batch = rows, p.n_cols = c;
    // the form: 0 plain, 1 gated, 2 gated with the branch's bias (the groups' variant, as their names say)
    const int form = bias ? 2 : gated ? 1 : 0;
    static const char* const kForms[] = {"_", "_gated_", "_gated_bias_"};
    run(OP_ADA_LAYER_NORM, dt, form, p, r, "ada_layer_norm" + std::string(kForms[form]) + dt,
        std::to_string(rows) + "_" + std::to_string(c), memory_, stream(ctx),
        [&] { return where("X " + shape_str(xs) + " " + dt); });
  }

  void cpu(ONNXTensorElementDataType et, const void* x, const void* scale, const void* shift, const void* branch,
           const void* gate, const void* bias, void* y, void* sum, int64_t rows, int64_t c, int64_t per_item) const {
    std::vector<double> s(static_cast<size_t>(c));
    for (int64_t r = 0; r < rows; ++r) {
      const int64_t item = r / per_item;
      double mean = 0;
      for (int64_t j = 0; j < c; ++j) {
        double v = load(x, et, r * c + j);
        if (branch) {
          v += static_cast<double>(load(gate, et, item * c + j)) *
               (static_cast<double>(load(branch, et, r * c + j)) + (bias ? load(bias, et, j) : 0.0));
          v = v < clip_lo_ ? clip_lo_ : v > clip_hi_ ? clip_hi_ : v;
        }
        s[j] = v;
        mean += v;
      }
      mean /= static_cast<double>(c);
      double var = 0;
      for (int64_t j = 0; j < c; ++j) var += (s[j] - mean) * (s[j] - mean);
      const double rstd = 1 / std::sqrt(var / static_cast<double>(c) + eps_);
      for (int64_t j = 0; j < c; ++j) {
        if (sum) store(sum, et, r * c + j, static_cast<float>(s[j]));
        const double v = (s[j] - mean) * rstd * (1 + static_cast<double>(load(scale, et, item * c + j))) +
                         load(shift, et, item * c + j);
        store(y, et, r * c + j, static_cast<float>(v));
      }
    }
  }

  float eps_, clip_lo_, clip_hi_;
  bool clipped_;
};

// Every input shares X's element type, which the model gives.
struct AdaLayerNormOp : TypedOp<AdaLayerNormOp, AdaLayerNormKernel> {
  using TypedOp::TypedOp;
  const char* GetName() const { return "AdaLayerNorm"; }
  size_t GetInputTypeCount() const { return 6; }
  size_t GetOutputTypeCount() const { return 2; }
  OrtCustomOpInputOutputCharacteristic GetInputCharacteristic(size_t i) const {
    return i >= 3 ? INPUT_OUTPUT_OPTIONAL : INPUT_OUTPUT_REQUIRED;
  }
  OrtCustomOpInputOutputCharacteristic GetOutputCharacteristic(size_t i) const {
    return i == 1 ? INPUT_OUTPUT_OPTIONAL : INPUT_OUTPUT_REQUIRED;
  }
};

}  // namespace

std::vector<OrtCustomOp*> ada_layer_norm_ops(bool cuda) { return typed_ops<AdaLayerNormOp>(cuda); }

}  // namespace tf
