// RotaryEmbedding: rotary position embedding on interleaved pairs in one node, Y = X * cos + rot(X) * sin,
// where rot takes each pair (x[2i], x[2i+1]) of the last axis to (-x[2i+1], x[2i]) (Flux's queries and keys).
// kernels/rotary_embedding_triton.py on CUDA, plain C++ in double on the CPU.
//
// Inputs: X (..., D), D even, in float, float16 or bfloat16; cos and sin: float, one shape, broadcast against X
// as numpy does: last dim D, and the dims that are not 1 one run of X's (the positions: (1, S, 1, D) against
// (B, S, H, D) heads, (S, D) against (B, H, S, D), (B, S, D) against (B, S, D)). Y has X's shape and type.
//
// With gamma (float, (D)), each row of X is first RMS-normalized over D, x / sqrt(mean(x^2) + epsilon) * gamma
// (Flux's q/k norm). With X_b (X's type and shape but on `axis`) and gamma_b too, the rows normalized are those
// of Concat(X, X_b, axis), X's with gamma and X_b's with gamma_b (Flux's double blocks join the text's and the
// image's heads between the norm and the rotation); cos and sin broadcast against that join, which is Y's shape.
#include <array>

#include "op_base.h"

namespace tf {
namespace {

class RotaryEmbeddingKernel : public KernelBase {
 public:
  RotaryEmbeddingKernel(const OrtKernelInfo* info, bool cuda)
      : KernelBase(info, "RotaryEmbedding", cuda),
        eps_(attr_float(info, "epsilon", 1e-5f)),
        axis_(attr_int(info, "axis", 1, false, "RotaryEmbedding")) {}

 protected:
  // How X's rows meet cos's: `positions` rows of cos, each shared by `per_position` consecutive rows of X; a
  // bad-input error naming the shapes where cos does not broadcast so.
  void positions_of(const std::vector<int64_t>& xs, const std::vector<int64_t>& cs, int64_t* positions,
                    int64_t* per_position, const char* whose = "X's") const {
    const std::string said = "cos has shape " + shape_str(cs) + " against " + whose + " " + shape_str(xs);
    if (cs.empty() || cs.size() > xs.size() || cs.back() != xs.back())
      bad(said + "; expected X's last dim and at most X's rank");
    // X's axes before the last, cos's aligned to them from the right (missing ones are 1); axes where X is 1
    // take no part
    const size_t lead = xs.size() - 1, pad = xs.size() - cs.size();
    size_t first = lead, last = lead;  // the run of axes where cos is X's: [first, last)
    bool broadcast_after = false;      // an axis cos broadcasts over came after the run began
    for (size_t a = 0; a < lead; ++a) {
      const int64_t c = a < pad ? 1 : cs[a - pad];
      if (xs[a] == 1 && c == 1) continue;
      if (c == 1) {
        broadcast_after = first != lead;
        continue;
      }
      if (c != xs[a]) bad(said + ": dim " + std::to_string(a) + " is neither 1 nor X's");
      if (broadcast_after) bad(said + ": the dims where it is not 1 are not one run of X's axes");
      if (first == lead) first = a;
      last = a + 1;
    }
    if (first == lead) last = lead;
    *positions = product(xs, first, last);
    *per_position = product(xs, last, lead);
  }

  // Input i, or a null value where the node leaves it out.
  static Ort::ConstValue optional(Ort::KernelContext& ctx, size_t i) {
    return ctx.GetInputCount() > i ? ctx.GetInput(i) : Ort::ConstValue{nullptr};
  }

  // The normalized form's inputs: gamma (D) float for X, and for X_b where X_b is given; X_b's shape against X's
  // on axis_. Returns X_b's length on axis_ (0: no X_b).
  int64_t check_norm(const Input& in, const Ort::ConstValue& gamma, const Ort::ConstValue& xb,
                     const Ort::ConstValue& gamma_b) const {
    const std::vector<int64_t>& xs = in.shape;
    per_channel_floats(gamma, "gamma", xs.back(), " (the norm's weight in fp32)", " (X's last dim)");
    if (static_cast<bool>(xb) != static_cast<bool>(gamma_b))
      bad("inputs X_b and gamma_b come together: one is missing");
    if (!xb) return 0;
    per_channel_floats(gamma_b, "gamma_b", xs.back(), " (the norm's weight in fp32)", " (X's last dim)");
    const int64_t rank = static_cast<int64_t>(xs.size());
    if (axis_ < 0 || axis_ >= rank - 1)
      bad("attribute axis " + std::to_string(axis_) + " is not an axis of X " + shape_str(xs) + " before the last");
    if (float_type(xb, "X_b") != in.dtype) bad("input X_b's element type differs from X's");
    auto bs = xb.GetTensorTypeAndShapeInfo().GetShape();
    bool same = bs.size() == xs.size();
    for (int64_t a = 0; same && a < rank; ++a) same = a == axis_ || bs[a] == xs[a];
    if (!same)
      bad("input X_b has shape " + shape_str(bs) + "; expected X's " + shape_str(xs) + " but on axis " +
          std::to_string(axis_));
    return bs[axis_];
  }

  void Compute(Ort::KernelContext& ctx) override {
    auto x = ctx.GetInput(0), cos = ctx.GetInput(1), sin = ctx.GetInput(2);
    const Input in = input_x(x);
    if (in.shape.empty() || in.shape.back() % 2)
      bad("input X has shape " + shape_str(in.shape) + "; expected (..., D) with D even");
    auto gamma = optional(ctx, 3), xb = optional(ctx, 4), gamma_b = optional(ctx, 5);
    const bool norm = static_cast<bool>(gamma);
    if (!norm && (xb || gamma_b)) bad("inputs X_b and gamma_b join a second stream to the norm's: they need gamma");
    const int64_t seq_b = norm ? check_norm(in, gamma, xb, gamma_b) : 0;
    // Y's shape: X's, or the join's
    std::vector<int64_t> ys = in.shape;
    const size_t axis = seq_b ? static_cast<size_t>(axis_) : 0;
    const int64_t seq_a = seq_b ? ys[axis] : 0;
    if (seq_b) ys[axis] += seq_b;
    for (auto [v, name] : {std::pair{&cos, "cos"}, std::pair{&sin, "sin"}})
      if (v->GetTensorTypeAndShapeInfo().GetElementType() != ONNX_TENSOR_ELEMENT_DATA_TYPE_FLOAT)
        bad(std::string("input ") + name + " must be float (the rotation is computed in fp32)");
    const auto cs = cos.GetTensorTypeAndShapeInfo().GetShape();
    if (sin.GetTensorTypeAndShapeInfo().GetShape() != cs)
      bad("inputs cos " + shape_str(cs) + " and sin " + shape_str(sin.GetTensorTypeAndShapeInfo().GetShape()) +
          " differ in shape");
    int64_t positions = 1, per_position = 1;
    positions_of(ys, cs, &positions, &per_position, seq_b ? "the join of X and X_b's" : "X's");
    auto y = ctx.GetOutput(0, ys);
    const int64_t d = ys.back(), rows = product(ys, 0, ys.size() - 1);
    if (rows * d == 0) return;
    // the join: rows of a token run, tokens of an item (one stream: the whole of X is stream a)
    const int64_t per_token = seq_b ? product(ys, axis + 1, ys.size() - 1) : 1;
    const int64_t seq_x = seq_b ? seq_a : rows;
    const float* c = cos.GetTensorData<float>();
    const float* s = sin.GetTensorData<float>();
    if (!cuda_) {
      cpu(in.type, {x, xb}, {gamma, gamma_b}, y, c, s, rows, d, seq_x, seq_b, per_token, positions, per_position);
      return;
    }
    if (d > INT32_MAX) bad("X's last dim " + std::to_string(d) + " is past the kernels' i32");
    RoleValues r;
    r.u[R_IN] = reinterpret_cast<uint64_t>(x.GetTensorRawData());
    r.u[R_OUT] = reinterpret_cast<uint64_t>(y.GetTensorMutableRawData());
    r.u[R_COS] = reinterpret_cast<uint64_t>(c);
    r.u[R_SIN] = reinterpret_cast<uint64_t>(s);
    r.u[R_BATCH] = static_cast<uint64_t>(rows);
    r.u[R_N_COLS] = static_cast<uint64_t>(d);
    r.u[R_POSITIONS] = static_cast<uint64_t>(positions);
    r.u[R_ROWS_PER_POSITION] = static_cast<uint64_t>(per_position);
    std::string key = std::to_string(rows) + "_" + std::to_string(d);
    if (norm) {
      r.u[R_IN_B] = reinterpret_cast<uint64_t>((seq_b ? xb : x).GetTensorRawData());
      r.u[R_GAMMA] = reinterpret_cast<uint64_t>(gamma.GetTensorRawData());
      r.u[R_GAMMA_B] = reinterpret_cast<uint64_t>((seq_b ? gamma_b : gamma).GetTensorRawData());
      r.u[R_SEQ_A] = static_cast<uint64_t>(seq_x);
      r.u[R_SEQ_B] = static_cast<uint64_t>(seq_b);
      r.u[R_ROWS_PER_TOKEN] = static_cast<uint64_t>(per_token);
      r.f[R_EPS] = eps_;
      key += "_" + std::to_string(seq_b);
    }
    Problem p;
    p.batch = rows, p.n_cols = d;
    run(OP_ROTARY_EMBEDDING, in.dtype, norm ? 1 : 0, p, r, std::string("rotary_embedding_") + (norm ? "rms_" : "") +
        in.dtype, key, memory_, stream(ctx), [&] { return where("X " + shape_str(in.shape) + " " + in.dtype); });
  }

  // Plain C++ in double: row r of Y from its stream's row, normalized where gamma is given, then turned.
  void cpu(ONNXTensorElementDataType type, std::array<Ort::ConstValue, 2> x, std::array<Ort::ConstValue, 2> gamma,
           Ort::UnownedValue& y, const float* c, const float* s, int64_t rows, int64_t d, int64_t seq_a, int64_t seq_b,
           int64_t per_token, int64_t positions, int64_t per_position) const {
    std::vector<double> row(d);
    for (int64_t r = 0; r < rows; ++r) {
      const int64_t token = r / per_token, lane = r % per_token;
      const int64_t item = token / (seq_a + seq_b), t = token % (seq_a + seq_b);
      const bool first = t < seq_a;
      const void* src = x[first ? 0 : 1].GetTensorRawData();
      const int64_t at = ((first ? item * seq_a + t : item * seq_b + t - seq_a) * per_token + lane) * d;
      double scale = 1, sum = 0;
      for (int64_t j = 0; j < d; ++j) sum += (row[j] = load(src, type, at + j)) * row[j];
      if (gamma[0]) {
        scale = 1 / std::sqrt(sum / d + eps_);
        const float* g = gamma[first ? 0 : 1].GetTensorData<float>();
        for (int64_t j = 0; j < d; ++j) row[j] *= scale * g[j];
      }
      const int64_t at_pos = (r / per_position) % positions * d;
      for (int64_t j = 0; j < d; ++j) {
        const double partner = row[j ^ 1];
        const double v = row[j] * c[at_pos + j] + (j % 2 ? partner : -partner) * s[at_pos + j];
        store(y.GetTensorMutableRawData(), type, r * d + j, static_cast<float>(v));
      }
    }
  }

  float eps_;
  int64_t axis_;
};

// X's element type is the model's, cos and sin are float: one typed declaration per element type of X.
// X_b (input 4) is of X's type too. The output is the join's shape where X_b is given: ORT takes it from the kernel.
struct RotaryEmbeddingOp : TypedOp<RotaryEmbeddingOp, RotaryEmbeddingKernel> {
  RotaryEmbeddingOp(bool cuda, ONNXTensorElementDataType type) : TypedOp(cuda, type) { InferOutputShapeFn = nullptr; }
  const char* GetName() const { return "RotaryEmbedding"; }
  size_t GetInputTypeCount() const { return 6; }
  size_t GetOutputTypeCount() const { return 1; }
  ONNXTensorElementDataType GetInputType(size_t i) const {
    return i == 0 || i == 4 ? type_ : ONNX_TENSOR_ELEMENT_DATA_TYPE_FLOAT;
  }
  OrtCustomOpInputOutputCharacteristic GetInputCharacteristic(size_t i) const {
    return i >= 3 ? INPUT_OUTPUT_OPTIONAL : INPUT_OUTPUT_REQUIRED;
  }
};

}  // namespace

std::vector<OrtCustomOp*> rotary_embedding_ops(bool cuda) { return typed_ops<RotaryEmbeddingOp>(cuda); }

}  // namespace tf
