// RotaryEmbedding: rotary position embedding on interleaved pairs in one node, Y = X * cos + rot(X) * sin,
// where rot takes each pair (x[2i], x[2i+1]) of the last axis to (-x[2i+1], x[2i]) (Flux's queries and keys).
// kernels/rotary_embedding_triton.py on CUDA, plain C++ in double on the CPU.
//
// Inputs: X (..., D), D even, in float, float16 or bfloat16; cos and sin: float, one shape, broadcast against X
// as numpy does: last dim D, and the dims that are not 1 one run of X's (the positions: (1, S, 1, D) against
// (B, S, H, D) heads, (S, D) against (B, H, S, D), (B, S, D) against (B, S, D)). Y has X's shape and type.
#include "op_base.h"

namespace tf {
namespace {

class RotaryEmbeddingKernel : public KernelBase {
 public:
  RotaryEmbeddingKernel(const OrtKernelInfo* info, bool cuda) : KernelBase(info, "RotaryEmbedding", cuda) {}

 protected:
  // How X's rows meet cos's: `positions` rows of cos, each shared by `per_position` consecutive rows of X; a
  // bad-input error naming the shapes where cos does not broadcast so.
  void positions_of(const std::vector<int64_t>& xs, const std::vector<int64_t>& cs, int64_t* positions,
                    int64_t* per_position) const {
    const std::string said = "cos has shape " + shape_str(cs) + " against X's " + shape_str(xs);
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

  void Compute(Ort::KernelContext& ctx) override {
    auto x = ctx.GetInput(0), cos = ctx.GetInput(1), sin = ctx.GetInput(2);
    const Input in = input_x(x);
    const std::vector<int64_t>& xs = in.shape;
    if (xs.empty() || xs.back() % 2) bad("input X has shape " + shape_str(xs) + "; expected (..., D) with D even");
    for (auto [v, name] : {std::pair{&cos, "cos"}, std::pair{&sin, "sin"}})
      if (v->GetTensorTypeAndShapeInfo().GetElementType() != ONNX_TENSOR_ELEMENT_DATA_TYPE_FLOAT)
        bad(std::string("input ") + name + " must be float (the rotation is computed in fp32)");
    const auto cs = cos.GetTensorTypeAndShapeInfo().GetShape();
    if (sin.GetTensorTypeAndShapeInfo().GetShape() != cs)
      bad("inputs cos " + shape_str(cs) + " and sin " + shape_str(sin.GetTensorTypeAndShapeInfo().GetShape()) +
          " differ in shape");
    int64_t positions = 1, per_position = 1;
    positions_of(xs, cs, &positions, &per_position);
    auto y = ctx.GetOutput(0, xs);
    const int64_t d = xs.back(), rows = product(xs, 0, xs.size() - 1);
    if (rows * d == 0) return;
    const float* c = cos.GetTensorData<float>();
    const float* s = sin.GetTensorData<float>();
    if (!cuda_) {
      for (int64_t r = 0; r < rows; ++r) {
        const int64_t at = r * d, at_pos = (r / per_position) % positions * d;
        for (int64_t j = 0; j < d; ++j) {
          const double partner = load(x.GetTensorRawData(), in.type, at + (j ^ 1));
          const double v = static_cast<double>(load(x.GetTensorRawData(), in.type, at + j)) * c[at_pos + j] +
                           (j % 2 ? partner : -partner) * s[at_pos + j];
          store(y.GetTensorMutableRawData(), in.type, at + j, static_cast<float>(v));
        }
      }
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
    Problem p;
    p.batch = rows, p.n_cols = d;
    run(OP_ROTARY_EMBEDDING, in.dtype, 0, p, r, "rotary_embedding_" + in.dtype,
        std::to_string(rows) + "_" + std::to_string(d), memory_, stream(ctx),
        [&] { return where("X " + shape_str(xs) + " " + in.dtype); });
  }
};

// X's element type is the model's, cos and sin are float: one typed declaration per element type of X.
struct RotaryEmbeddingOp : TypedOp<RotaryEmbeddingOp, RotaryEmbeddingKernel> {
  using TypedOp::TypedOp;
  const char* GetName() const { return "RotaryEmbedding"; }
  size_t GetInputTypeCount() const { return 3; }
  size_t GetOutputTypeCount() const { return 1; }
  ONNXTensorElementDataType GetInputType(size_t i) const { return i ? ONNX_TENSOR_ELEMENT_DATA_TYPE_FLOAT : type_; }
};

}  // namespace

std::vector<OrtCustomOp*> rotary_embedding_ops(bool cuda) { return typed_ops<RotaryEmbeddingOp>(cuda); }

}  // namespace tf
