// MultiHeadAttention (com.microsoft.MultiHeadAttention's interface for separate query, key and value, no
// mask): kernels/attention_triton.py on CUDA, plain C++ in double on the CPU.
#include "op_base.h"

namespace tf {
namespace {

// ---- MultiHeadAttention ------------------------------------------------------------------------------
// query, key and value as (B, S, H*d) projections, or as 4-D heads: (B, H, S, d) (`layout` "BHSD", the
// default: ONNX Attention's) or (B, S, H, d) ("BSHD": the projections' memory, heads split). The output
// has query's shape and layout. Key and value may have fewer heads than query (kv_num_heads for 3-D
// inputs, their head axis for 4-D), each serving num_heads / kv heads query heads in turn (grouped-query
// attention); value's head dim is query's.
struct Heads {
  int64_t b = 0, s = 0, h = 0, d = 0;  // batch, positions, heads, head dim
  int64_t sb = 0, sh = 0, ss = 0;      // element strides of a batch, a head, a position
  int64_t at(int64_t n, int64_t head, int64_t pos) const { return n * sb + head * sh + pos * ss; }
};

class Attention : public KernelBase {
 public:
  Attention(const OrtKernelInfo* info, bool cuda) : KernelBase(info, "MultiHeadAttention", cuda) {
    heads_ = attr_int(info, "num_heads", 0, false, "MultiHeadAttention");
    kv_heads_ = attr_int(info, "kv_num_heads", 0, false, "MultiHeadAttention");
    scale_ = attr_float(info, "scale", 0.0f);
    causal_ = attr_int(info, "unidirectional", 0, false, "MultiHeadAttention");
    std::string layout = attr_string(info, "layout", "BHSD");
    if (heads_ < 0 || kv_heads_ < 0)
      throw Ort::Exception(where("num_heads and kv_num_heads must not be negative"), ORT_INVALID_ARGUMENT);
    if (causal_ != 0 && causal_ != 1)
      throw Ort::Exception(where("unidirectional must be 0 or 1"), ORT_INVALID_ARGUMENT);
    if (layout != "BHSD" && layout != "BSHD")
      throw Ort::Exception(where("layout must be BHSD or BSHD, not '" + layout + "'"), ORT_INVALID_ARGUMENT);
    heads_first_ = layout == "BHSD";
  }

 protected:
  // (B, S, n*d) as n heads of d.
  static Heads projection(const std::vector<int64_t>& s, int64_t n, int64_t d) {
    return {s[0], s[1], n, d, s[1] * n * d, d, n * d};
  }
  Heads four_d(const std::vector<int64_t>& s) const {
    if (heads_first_) return {s[0], s[2], s[1], s[3], s[1] * s[2] * s[3], s[2] * s[3], s[3]};
    return {s[0], s[1], s[2], s[3], s[1] * s[2] * s[3], s[3], s[2] * s[3]};
  }

  void Compute(Ort::KernelContext& ctx) override {
    auto q = ctx.GetInput(0), k = ctx.GetInput(1), v = ctx.GetInput(2);
    const Input in = input_x(q);
    const std::string& dt = in.dtype;
    const std::vector<int64_t>& qs = in.shape;
    if (float_type(k, "key") != dt || float_type(v, "value") != dt) bad("key and value must have query's element type");
    auto ks = k.GetTensorTypeAndShapeInfo().GetShape(), vs = v.GetTensorTypeAndShapeInfo().GetShape();
    const std::string shapes = "query " + shape_str(qs) + ", key " + shape_str(ks) + ", value " + shape_str(vs);
    Heads Q, K, V;
    if (qs.size() == 3) {
      if (heads_ < 1) bad("a 3-D query (batch, sequence, heads * head_dim) needs num_heads");
      if (ks.size() != 3 || vs.size() != 3) bad(shapes + ": key and value must be 3-D as query is");
      if (qs[2] % heads_)
        bad(std::to_string(qs[2]) + " query channels do not split into " + std::to_string(heads_) + " heads");
      int64_t d = qs[2] / heads_, hk = kv_heads_ ? kv_heads_ : heads_;
      if (ks[2] != hk * d || vs[2] != hk * d)
        bad(shapes + ": key and value need " + std::to_string(hk) + " heads of " + std::to_string(d) + " channels (" +
            std::to_string(hk * d) + ")");
      Q = projection(qs, heads_, d), K = projection(ks, hk, d), V = projection(vs, hk, d);
    } else if (qs.size() == 4) {
      if (ks.size() != 4 || vs.size() != 4) bad(shapes + ": key and value must be 4-D as query is");
      Q = four_d(qs), K = four_d(ks), V = four_d(vs);
      const char* layout = heads_first_ ? "(batch, heads, sequence, head_dim)" : "(batch, sequence, heads, head_dim)";
      if (heads_ && Q.h != heads_)
        bad(shapes + ": query has " + std::to_string(Q.h) + " heads " + layout + ", num_heads says " +
            std::to_string(heads_));
      if (kv_heads_ && K.h != kv_heads_)
        bad(shapes + ": key has " + std::to_string(K.h) + " heads " + layout + ", kv_num_heads says " +
            std::to_string(kv_heads_));
      if (K.d != Q.d || V.d != Q.d || V.h != K.h)
        bad(shapes + ": query, key and value need one head dim, and key and value one head count " + layout);
    } else {
      bad("input query has shape " + shape_str(qs) + "; expected (batch, sequence, heads * head_dim) or 4-D heads");
    }
    if (K.b != Q.b || V.b != Q.b || V.s != K.s) bad(shapes + ": key and value need query's batch and one sequence");
    if (K.h < 1 || Q.h % K.h)
      bad(shapes + ": " + std::to_string(Q.h) + " query heads do not share " + std::to_string(K.h) +
          " key/value heads evenly");
    int64_t b = Q.b, sq = Q.s, skv = K.s, d = Q.d, heads = Q.h;
    if (skv == 0 && b * sq * heads * d != 0) bad("key has no positions to attend");
    float scale = scale_ != 0.0f ? scale_ : static_cast<float>(1.0 / std::sqrt(static_cast<double>(d)));
    auto y = ctx.GetOutput(0, qs);
    if (b * sq * heads * d == 0) return;
    const Heads& O = Q;  // the output is laid out as query is
    if (!cuda_) {
      cpu(in.type, q.GetTensorRawData(), k.GetTensorRawData(), v.GetTensorRawData(), y.GetTensorMutableRawData(), Q, K,
          V, O, scale);
      return;
    }
    RoleValues r;
    r.u[R_Q] = reinterpret_cast<uint64_t>(q.GetTensorRawData());
    r.u[R_K] = reinterpret_cast<uint64_t>(k.GetTensorRawData());
    r.u[R_V] = reinterpret_cast<uint64_t>(v.GetTensorRawData());
    r.u[R_OUT] = reinterpret_cast<uint64_t>(y.GetTensorMutableRawData());
    r.f[R_SCALE] = scale;
    const Heads* all[] = {&Q, &K, &V, &O};
    const int roles[][3] = {{R_Q_BATCH_STRIDE, R_Q_HEAD_STRIDE, R_Q_SEQ_STRIDE},
                            {R_K_BATCH_STRIDE, R_K_HEAD_STRIDE, R_K_SEQ_STRIDE},
                            {R_V_BATCH_STRIDE, R_V_HEAD_STRIDE, R_V_SEQ_STRIDE},
                            {R_OUT_BATCH_STRIDE, R_OUT_HEAD_STRIDE, R_OUT_SEQ_STRIDE}};
    for (int t = 0; t < 4; ++t) {
      r.u[roles[t][0]] = static_cast<uint64_t>(all[t]->sb);
      r.u[roles[t][1]] = static_cast<uint64_t>(all[t]->sh);
      r.u[roles[t][2]] = static_cast<uint64_t>(all[t]->ss);
    }
    r.u[R_HEADS] = heads;
    r.u[R_KV_GROUP] = heads / K.h;
    r.u[R_SQ] = sq;
    r.u[R_SKV] = skv;
    r.u[R_HEAD_DIM] = d;
    Problem p;
    // every stride is a multiple of the head dim
    p.batch = b, p.heads = heads, p.sq = sq, p.skv = skv, p.head_dim = d, p.strides8 = d % 8 == 0;
    // the tune file's signature: (B, H, Sq, Skv, d), then what changes the memory walk
    std::string sig = std::to_string(b) + "_" + std::to_string(heads) + "_" + std::to_string(sq) + "_" +
                      std::to_string(skv) + "_" + std::to_string(d) +
                      (K.h != heads ? "_kv" + std::to_string(K.h) : "") + (qs.size() == 4 && heads_first_ ? "_bhsd" : "");
    run(OP_ATTENTION, dt, static_cast<int>(causal_), p, r, std::string(causal_ ? "attention_causal_" : "attention_") + dt,
        sig, memory_, stream(ctx), [&] { return where(shapes + " " + dt); });
  }

  void cpu(ONNXTensorElementDataType t, const void* q, const void* k, const void* v, void* y, const Heads& Q,
           const Heads& K, const Heads& V, const Heads& O, float scale) const {
    int64_t group = Q.h / K.h;
    std::vector<double> s(static_cast<size_t>(K.s)), acc(static_cast<size_t>(Q.d));
    for (int64_t n = 0; n < Q.b; ++n) {
      for (int64_t h = 0; h < Q.h; ++h) {
        int64_t hk = h / group;
        for (int64_t i = 0; i < Q.s; ++i) {
          int64_t keys = causal_ ? std::min(K.s, i + 1) : K.s;
          double m = -INFINITY, sum = 0;
          for (int64_t j = 0; j < keys; ++j) {
            double dot = 0;
            for (int64_t e = 0; e < Q.d; ++e)
              dot += static_cast<double>(load(q, t, Q.at(n, h, i) + e)) * load(k, t, K.at(n, hk, j) + e);
            s[j] = dot * scale;
            m = std::max(m, s[j]);
          }
          std::fill(acc.begin(), acc.end(), 0.0);
          for (int64_t j = 0; j < keys; ++j) {
            double p = std::exp(s[j] - m);
            sum += p;
            for (int64_t e = 0; e < Q.d; ++e) acc[e] += p * load(v, t, V.at(n, hk, j) + e);
          }
          for (int64_t e = 0; e < Q.d; ++e)
            store(y, t, O.at(n, h, i) + e, static_cast<float>(keys ? acc[e] / sum : 0.0));
        }
      }
    }
  }

  int64_t heads_, kv_heads_, causal_;
  float scale_;
  bool heads_first_;
};

// query, key and value share one element type, which the model gives.
struct AttentionOp : TypedOp<AttentionOp, Attention> {
  using TypedOp::TypedOp;
  const char* GetName() const { return "MultiHeadAttention"; }
  size_t GetInputTypeCount() const { return 3; }
  size_t GetOutputTypeCount() const { return 1; }
};

}  // namespace

std::vector<OrtCustomOp*> attention_ops(bool cuda) { return typed_ops<AttentionOp>(cuda); }

}  // namespace tf
