// tritonforge's custom ops for ONNX Runtime: GroupNorm (NHWC, com.microsoft.GroupNorm's interface),
// SkipGroupNorm (com.microsoft.SkipGroupNorm's), GroupNormalization (ONNX's, NCHW), Softmax and
// LogSoftmax over the last axis, and MultiHeadAttention (com.microsoft.MultiHeadAttention's interface for
// separate (B, S, H*d) query, key and value, no mask), in the domain "tritonforge". Each op is registered twice: for the CUDA
// EP, where it launches the build's Triton kernels on the session's stream (launch.cc), and for the CPU
// EP, in plain C++ with double-precision statistics, so the same graph runs in CPU sessions and tests.
// Bad input fails the node with an ORT error that names the op, the node and the problem.
#define ORT_API_MANUAL_INIT
#include <onnxruntime_cxx_api.h>
#undef ORT_API_MANUAL_INIT

#include <atomic>
#include <initializer_list>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <sstream>
#include <stdexcept>
#include <string>
#include <vector>

#include "launch.h"
#include "table.h"

namespace tf {
namespace {

const char* kDomain = "tritonforge";
const char* kCuda = "CUDAExecutionProvider";

struct BadInput : std::runtime_error {
  using std::runtime_error::runtime_error;
};

std::string dtype_name(ONNXTensorElementDataType t) {
  switch (t) {
    case ONNX_TENSOR_ELEMENT_DATA_TYPE_FLOAT: return "fp32";
    case ONNX_TENSOR_ELEMENT_DATA_TYPE_FLOAT16: return "fp16";
    case ONNX_TENSOR_ELEMENT_DATA_TYPE_BFLOAT16: return "bf16";
    default: return "";
  }
}

std::string shape_str(const std::vector<int64_t>& s) {
  std::ostringstream o;
  o << "(";
  for (size_t i = 0; i < s.size(); ++i) o << (i ? ", " : "") << s[i];
  o << ")";
  return o.str();
}

int64_t product(const std::vector<int64_t>& s, size_t from = 0, size_t to = SIZE_MAX) {
  int64_t p = 1;
  for (size_t i = from; i < std::min(to, s.size()); ++i) p *= s[i];
  return p;
}

// Element access for the CPU paths, as float.
float load(const void* p, ONNXTensorElementDataType t, int64_t i) {
  if (t == ONNX_TENSOR_ELEMENT_DATA_TYPE_FLOAT) return static_cast<const float*>(p)[i];
  if (t == ONNX_TENSOR_ELEMENT_DATA_TYPE_FLOAT16) return static_cast<const Ort::Float16_t*>(p)[i].ToFloat();
  return static_cast<const Ort::BFloat16_t*>(p)[i].ToFloat();
}

void store(void* p, ONNXTensorElementDataType t, int64_t i, float v) {
  if (t == ONNX_TENSOR_ELEMENT_DATA_TYPE_FLOAT) static_cast<float*>(p)[i] = v;
  else if (t == ONNX_TENSOR_ELEMENT_DATA_TYPE_FLOAT16) static_cast<Ort::Float16_t*>(p)[i] = Ort::Float16_t(v);
  else static_cast<Ort::BFloat16_t*>(p)[i] = Ort::BFloat16_t(v);
}

// ---- the kernel base: node name, attributes, device memory, errors as ORT statuses -------------
class KernelBase {
 public:
  KernelBase(const OrtKernelInfo* info, const char* op, bool cuda) : op_(op), cuda_(cuda) {
    Ort::ConstKernelInfo ki(info);
    try {
      node_ = ki.GetNodeName();
    } catch (const Ort::Exception&) {
    }
    if (cuda_) {
      OrtAllocator* a = nullptr;
      Ort::ThrowOnError(Ort::GetApi().KernelInfoGetAllocator(info, OrtMemTypeDefault, &a));
      allocator_ = a;
      memory_.alloc = [a](size_t n) { return a->Alloc(a, n); };
      memory_.release = [a](void* p) { a->Free(a, p); };
    }
  }
  virtual ~KernelBase() {
    memory_.free_all();  // before the allocator that made it goes
    if (allocator_) Ort::GetApi().ReleaseAllocator(allocator_);
  }

  OrtStatusPtr ComputeV2(OrtKernelContext* context) {
    try {
      Ort::KernelContext ctx(context);
      Compute(ctx);
      return nullptr;
    } catch (const BadInput& e) {
      return Ort::GetApi().CreateStatus(ORT_INVALID_ARGUMENT, where(e.what()).c_str());
    } catch (const std::exception& e) {
      return Ort::GetApi().CreateStatus(ORT_FAIL, where(e.what()).c_str());
    }
  }

 protected:
  virtual void Compute(Ort::KernelContext& ctx) = 0;

  std::string where(const std::string& msg) const {
    return std::string(kDomain) + "." + op_ + " node '" + node_ + "' (" + (cuda_ ? "CUDA" : "CPU") + "): " + msg;
  }

  [[noreturn]] void bad(const std::string& msg) const { throw BadInput(msg); }

  static int64_t attr_int(const OrtKernelInfo* info, const char* name, int64_t dflt, bool required, const char* op) {
    int64_t v = dflt;
    OrtStatus* s = Ort::GetApi().KernelInfoGetAttribute_int64(info, name, &v);
    if (s) {
      Ort::GetApi().ReleaseStatus(s);
      if (required) throw Ort::Exception(std::string(kDomain) + "." + op + ": the attribute '" + name +
                                             "' is required", ORT_INVALID_ARGUMENT);
      return dflt;
    }
    return v;
  }

  static float attr_float(const OrtKernelInfo* info, const char* name, float dflt) {
    float v = dflt;
    OrtStatus* s = Ort::GetApi().KernelInfoGetAttribute_float(info, name, &v);
    if (s) {
      Ort::GetApi().ReleaseStatus(s);
      return dflt;
    }
    return v;
  }

  // An input's dtype (fp16, fp32, bf16), or a bad-input error naming it.
  std::string float_type(const Ort::ConstValue& v, const char* name) const {
    return float_type(v.GetTensorTypeAndShapeInfo().GetElementType(), name);
  }

  // X's dtype, element type and shape, from one query of its type and shape.
  struct Input {
    std::string dtype;
    ONNXTensorElementDataType type;
    std::vector<int64_t> shape;
  };
  Input input_x(const Ort::ConstValue& x) const {
    auto info = x.GetTensorTypeAndShapeInfo();
    auto t = info.GetElementType();
    return {float_type(t, "X"), t, info.GetShape()};
  }

  void check_groups(int64_t c, int64_t groups) const {
    if (c % groups) bad(std::to_string(c) + " channels do not split into " + std::to_string(groups) + " groups");
  }

  std::string float_type(ONNXTensorElementDataType t, const char* name) const {
    std::string d = dtype_name(t);
    if (d.empty()) bad(std::string("input ") + name + " has element type " + std::to_string(t) +
                       "; float, float16 or bfloat16 are supported");
    return d;
  }

  // A float input with one value per channel, or a bad-input error naming it.
  void per_channel_floats(const Ort::ConstValue& v, const char* name, int64_t c, const char* float_hint,
                          const char* shape_hint) const {
    auto info = v.GetTensorTypeAndShapeInfo();
    if (info.GetElementType() != ONNX_TENSOR_ELEMENT_DATA_TYPE_FLOAT)
      bad(std::string("input ") + name + " must be float" + float_hint);
    if (info.GetElementCount() != static_cast<size_t>(c))
      bad(std::string("input ") + name + " has shape " + shape_str(info.GetShape()) + "; expected (" +
          std::to_string(c) + ")" + shape_hint);
  }

  void* stream(Ort::KernelContext& ctx) const { return ctx.GetGPUComputeStream(); }

  std::string op_, node_;
  bool cuda_;
  OrtAllocator* allocator_ = nullptr;
  DeviceMemory memory_;
};

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

// ---- MultiHeadAttention: query (B, Sq, H*d), key and value (B, Skv, H*d) -> (B, Sq, H*d) ---------------
class Attention : public KernelBase {
 public:
  Attention(const OrtKernelInfo* info, bool cuda) : KernelBase(info, "MultiHeadAttention", cuda) {
    heads_ = attr_int(info, "num_heads", 0, true, "MultiHeadAttention");
    scale_ = attr_float(info, "scale", 0.0f);
    causal_ = attr_int(info, "unidirectional", 0, false, "MultiHeadAttention");
    if (heads_ < 1) throw Ort::Exception(where("num_heads must be at least 1"), ORT_INVALID_ARGUMENT);
    if (causal_ != 0 && causal_ != 1)
      throw Ort::Exception(where("unidirectional must be 0 or 1"), ORT_INVALID_ARGUMENT);
  }

 protected:
  void Compute(Ort::KernelContext& ctx) override {
    auto q = ctx.GetInput(0), k = ctx.GetInput(1), v = ctx.GetInput(2);
    const Input in = input_x(q);
    const std::string& dt = in.dtype;
    const std::vector<int64_t>& qs = in.shape;
    if (float_type(k, "key") != dt || float_type(v, "value") != dt) bad("key and value must have query's element type");
    auto ks = k.GetTensorTypeAndShapeInfo().GetShape(), vs = v.GetTensorTypeAndShapeInfo().GetShape();
    if (qs.size() != 3) bad("input query has shape " + shape_str(qs) + "; expected (batch, sequence, heads * head_dim)");
    if (ks.size() != 3 || ks[0] != qs[0] || ks[2] != qs[2])
      bad("input key has shape " + shape_str(ks) + "; expected (" + std::to_string(qs[0]) + ", kv_sequence, " +
          std::to_string(qs[2]) + ") for query " + shape_str(qs));
    if (vs != ks) bad("input value has shape " + shape_str(vs) + "; expected key's " + shape_str(ks));
    int64_t b = qs[0], sq = qs[1], c = qs[2], skv = ks[1];
    if (c % heads_) bad(std::to_string(c) + " query channels do not split into " + std::to_string(heads_) + " heads");
    if (skv == 0 && b * sq * c) bad("key has no positions to attend");
    int64_t d = c / heads_;
    float scale = scale_ != 0.0f ? scale_ : static_cast<float>(1.0 / std::sqrt(static_cast<double>(d)));
    auto y = ctx.GetOutput(0, qs);
    if (b * sq * c == 0) return;
    if (!cuda_) {
      cpu(in.type, q.GetTensorRawData(), k.GetTensorRawData(), v.GetTensorRawData(), y.GetTensorMutableRawData(), b,
          sq, skv, d, scale);
      return;
    }
    RoleValues r;
    r.u[R_Q] = reinterpret_cast<uint64_t>(q.GetTensorRawData());
    r.u[R_K] = reinterpret_cast<uint64_t>(k.GetTensorRawData());
    r.u[R_V] = reinterpret_cast<uint64_t>(v.GetTensorRawData());
    r.u[R_OUT] = reinterpret_cast<uint64_t>(y.GetTensorMutableRawData());
    r.f[R_SCALE] = scale;
    // (B, S, H*d): a head is d elements on, a position H*d
    r.u[R_Q_BATCH_STRIDE] = r.u[R_OUT_BATCH_STRIDE] = sq * c;
    r.u[R_K_BATCH_STRIDE] = r.u[R_V_BATCH_STRIDE] = skv * c;
    r.u[R_Q_HEAD_STRIDE] = r.u[R_K_HEAD_STRIDE] = r.u[R_V_HEAD_STRIDE] = r.u[R_OUT_HEAD_STRIDE] = d;
    r.u[R_Q_SEQ_STRIDE] = r.u[R_K_SEQ_STRIDE] = r.u[R_V_SEQ_STRIDE] = r.u[R_OUT_SEQ_STRIDE] = c;
    r.u[R_HEADS] = heads_;
    r.u[R_SQ] = sq;
    r.u[R_SKV] = skv;
    r.u[R_HEAD_DIM] = d;
    Problem p;
    p.batch = b, p.heads = heads_, p.sq = sq, p.skv = skv, p.head_dim = d, p.strides8 = d % 8 == 0;
    std::string sig = std::to_string(b) + "_" + std::to_string(heads_) + "_" + std::to_string(sq) + "_" +
                      std::to_string(skv) + "_" + std::to_string(d);
    run(OP_ATTENTION, dt, static_cast<int>(causal_), p, r, std::string(causal_ ? "attention_causal_" : "attention_") + dt,
        sig, memory_, stream(ctx), [&] { return where("query " + shape_str(qs) + " key " + shape_str(ks) + " " + dt); });
  }

  void cpu(ONNXTensorElementDataType t, const void* q, const void* k, const void* v, void* y, int64_t b, int64_t sq,
           int64_t skv, int64_t d, float scale) const {
    int64_t c = heads_ * d;
    std::vector<double> s(static_cast<size_t>(skv)), acc(static_cast<size_t>(d));
    for (int64_t n = 0; n < b; ++n) {
      for (int64_t h = 0; h < heads_; ++h) {
        for (int64_t i = 0; i < sq; ++i) {
          int64_t keys = causal_ ? std::min(skv, i + 1) : skv;
          double m = -INFINITY, sum = 0;
          for (int64_t j = 0; j < keys; ++j) {
            double dot = 0;
            for (int64_t e = 0; e < d; ++e)
              dot += static_cast<double>(load(q, t, (n * sq + i) * c + h * d + e)) * load(k, t, (n * skv + j) * c + h * d + e);
            s[j] = dot * scale;
            m = std::max(m, s[j]);
          }
          std::fill(acc.begin(), acc.end(), 0.0);
          for (int64_t j = 0; j < keys; ++j) {
            double p = std::exp(s[j] - m);
            sum += p;
            for (int64_t e = 0; e < d; ++e) acc[e] += p * load(v, t, (n * skv + j) * c + h * d + e);
          }
          for (int64_t e = 0; e < d; ++e)
            store(y, t, (n * sq + i) * c + h * d + e, static_cast<float>(keys ? acc[e] / sum : 0.0));
        }
      }
    }
  }

  int64_t heads_, causal_;
  float scale_;
};

// ---- op declarations --------------------------------------------------------------------------
// X's type and shape as ORT is told it: a dim the model leaves unknown (no value, no name) comes back
// from ORT as -1, and ORT would write -1 back as a fixed size that every reader's inference then
// checks against; it goes back as a name of its own, which claims nothing but "some size".
OrtStatusPtr shape_of_x(OrtShapeInferContext* ctx, OrtTensorTypeAndShapeInfo** out) {
  static std::atomic<uint64_t> unknown{0};
  const OrtApi& api = Ort::GetApi();
  OrtTensorTypeAndShapeInfo* x = nullptr;  // belongs to the context
  if (OrtStatusPtr s = api.ShapeInferContext_GetInputTypeShape(ctx, 0, &x)) return s;
  size_t rank = 0;
  ONNXTensorElementDataType type = ONNX_TENSOR_ELEMENT_DATA_TYPE_UNDEFINED;
  if (OrtStatusPtr s = api.GetDimensionsCount(x, &rank)) return s;
  if (OrtStatusPtr s = api.GetTensorElementType(x, &type)) return s;
  std::vector<int64_t> dims(rank);
  std::vector<const char*> given(rank, nullptr);
  if (rank) {
    if (OrtStatusPtr s = api.GetDimensions(x, dims.data(), rank)) return s;
    if (OrtStatusPtr s = api.GetSymbolicDimensions(x, given.data(), rank)) return s;
  }
  std::vector<std::string> names(rank);
  for (size_t i = 0; i < rank; ++i) {
    if (given[i] && *given[i]) names[i] = given[i];
    else if (dims[i] < 0) names[i] = "tritonforge_unk_" + std::to_string(unknown++);
  }
  std::vector<const char*> params(rank);
  for (size_t i = 0; i < rank; ++i) params[i] = names[i].c_str();
  OrtTensorTypeAndShapeInfo* info = nullptr;
  if (OrtStatusPtr s = api.CreateTensorTypeAndShapeInfo(&info)) return s;
  OrtStatusPtr s = api.SetTensorElementType(info, type);
  if (!s) s = api.SetDimensions(info, dims.data(), rank);
  if (!s) s = api.SetSymbolicDimensions(info, params.data(), rank);
  if (s) {
    api.ReleaseTensorTypeAndShapeInfo(info);
    return s;
  }
  *out = info;
  return nullptr;
}

// Every output has X's type and shape (ORT needs this said when more than one input is typed by the
// model, as SkipGroupNorm's X, skip and bias are).
OrtStatusPtr same_as_x(const OrtCustomOp* op, OrtShapeInferContext* ctx) {
  const OrtApi& api = Ort::GetApi();
  OrtTensorTypeAndShapeInfo* info = nullptr;
  if (OrtStatusPtr s = shape_of_x(ctx, &info)) return s;
  size_t rank = 0;
  OrtStatusPtr status = api.GetDimensionsCount(info, &rank);
  // rank 0: X's shape unknown to the model (no scalar is valid input): say nothing
  size_t outputs = status || rank == 0 ? 0 : op->GetOutputTypeCount(op);
  for (size_t i = 0; i < outputs && !status; ++i) {
    status = api.ShapeInferContext_SetOutputTypeShape(ctx, i, info);
    if (status && i > 0) {  // an optional output the node leaves out
      api.ReleaseStatus(status);
      status = nullptr;
      break;
    }
  }
  api.ReleaseTensorTypeAndShapeInfo(info);  // ORT copied what it needed into the graph
  return status;
}

template <class Op, class Kernel>
struct OpBase : Ort::CustomOpBase<Op, Kernel, true> {
  explicit OpBase(bool cuda) : cuda_(cuda) { this->InferOutputShapeFn = same_as_x; }
  const char* GetExecutionProviderType() const { return cuda_ ? kCuda : nullptr; }
  OrtStatusPtr CreateKernelV2(const OrtApi&, const OrtKernelInfo* info, void** kernel) const {
    try {
      *kernel = static_cast<const Op*>(this)->Make(info);
      return nullptr;
    } catch (const std::exception& e) {
      return Ort::GetApi().CreateStatus(ORT_INVALID_ARGUMENT, e.what());
    }
  }
  bool cuda_;
};

#define TF_IO(inputs, outputs)                                                                             \
  size_t GetInputTypeCount() const { return inputs; }                                                      \
  size_t GetOutputTypeCount() const { return outputs; }                                                    \
  ONNXTensorElementDataType GetOutputType(size_t) const { return ONNX_TENSOR_ELEMENT_DATA_TYPE_UNDEFINED; }

struct GroupNormOp : OpBase<GroupNormOp, GroupNormNHWC> {
  using OpBase::OpBase;
  const char* GetName() const { return "GroupNorm"; }
  TF_IO(3, 1)
  ONNXTensorElementDataType GetInputType(size_t i) const {
    return i == 0 ? ONNX_TENSOR_ELEMENT_DATA_TYPE_UNDEFINED : ONNX_TENSOR_ELEMENT_DATA_TYPE_FLOAT;
  }
  GroupNormNHWC* Make(const OrtKernelInfo* info) const { return new GroupNormNHWC(info, "GroupNorm", cuda_, false); }
};

// X, skip and bias share one element type, which the model gives: one typed declaration per element type
// (onnxruntime before 1.21 accepts only one input of a type left to the model when an output's follows it).
struct SkipGroupNormOp : OpBase<SkipGroupNormOp, GroupNormNHWC> {
  SkipGroupNormOp(bool cuda, ONNXTensorElementDataType type) : OpBase(cuda), type_(type) {}
  const char* GetName() const { return "SkipGroupNorm"; }
  size_t GetInputTypeCount() const { return 5; }
  size_t GetOutputTypeCount() const { return 2; }
  ONNXTensorElementDataType GetInputType(size_t i) const {
    return i == 1 || i == 2 ? ONNX_TENSOR_ELEMENT_DATA_TYPE_FLOAT : type_;
  }
  ONNXTensorElementDataType GetOutputType(size_t) const { return type_; }
  OrtCustomOpInputOutputCharacteristic GetInputCharacteristic(size_t i) const {
    return i == 4 ? INPUT_OUTPUT_OPTIONAL : INPUT_OUTPUT_REQUIRED;
  }
  OrtCustomOpInputOutputCharacteristic GetOutputCharacteristic(size_t i) const {
    return i == 1 ? INPUT_OUTPUT_OPTIONAL : INPUT_OUTPUT_REQUIRED;
  }
  GroupNormNHWC* Make(const OrtKernelInfo* info) const {
    return new GroupNormNHWC(info, "SkipGroupNorm", cuda_, true);
  }
  ONNXTensorElementDataType type_;
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

// query, key and value share one element type, which the model gives: one typed declaration per type (as
// SkipGroupNorm's).
struct AttentionOp : OpBase<AttentionOp, Attention> {
  AttentionOp(bool cuda, ONNXTensorElementDataType type) : OpBase(cuda), type_(type) {}
  const char* GetName() const { return "MultiHeadAttention"; }
  size_t GetInputTypeCount() const { return 3; }
  size_t GetOutputTypeCount() const { return 1; }
  ONNXTensorElementDataType GetInputType(size_t) const { return type_; }
  ONNXTensorElementDataType GetOutputType(size_t) const { return type_; }
  Attention* Make(const OrtKernelInfo* info) const { return new Attention(info, cuda_); }
  ONNXTensorElementDataType type_;
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
}  // namespace tf

namespace {
tf::GroupNormOp g_group_norm[2] = {tf::GroupNormOp(false), tf::GroupNormOp(true)};
constexpr ONNXTensorElementDataType kFloats[] = {ONNX_TENSOR_ELEMENT_DATA_TYPE_FLOAT, ONNX_TENSOR_ELEMENT_DATA_TYPE_FLOAT16,
                                                ONNX_TENSOR_ELEMENT_DATA_TYPE_BFLOAT16};
tf::SkipGroupNormOp g_skip_group_norm[2][3] = {
    {tf::SkipGroupNormOp(false, kFloats[0]), tf::SkipGroupNormOp(false, kFloats[1]),
     tf::SkipGroupNormOp(false, kFloats[2])},
    {tf::SkipGroupNormOp(true, kFloats[0]), tf::SkipGroupNormOp(true, kFloats[1]),
     tf::SkipGroupNormOp(true, kFloats[2])}};
tf::GroupNormalizationOp g_group_normalization[2] = {tf::GroupNormalizationOp(false), tf::GroupNormalizationOp(true)};
tf::SoftmaxOp<false> g_softmax[2] = {tf::SoftmaxOp<false>(false), tf::SoftmaxOp<false>(true)};
tf::SoftmaxOp<true> g_log_softmax[2] = {tf::SoftmaxOp<true>(false), tf::SoftmaxOp<true>(true)};
tf::AttentionOp g_attention[2][3] = {
    {tf::AttentionOp(false, kFloats[0]), tf::AttentionOp(false, kFloats[1]), tf::AttentionOp(false, kFloats[2])},
    {tf::AttentionOp(true, kFloats[0]), tf::AttentionOp(true, kFloats[1]), tf::AttentionOp(true, kFloats[2])}};
std::string g_info;
std::string g_choices;

std::string json_escape(const std::string& s) {
  std::string out;
  for (char ch : s) {
    if (ch == '"' || ch == '\\') out += '\\';
    if (static_cast<unsigned char>(ch) >= 0x20) out += ch;
  }
  return out;
}
}  // namespace

// The toolchain (pipeline/package/toolchain.py) links no crtbeginS.o, whose job this is: when onnxruntime
// dlcloses the library, run the destructors its statics registered with __cxa_atexit, or exit() would
// later call into unmapped code.
extern "C" char __dso_handle;
extern "C" void __cxa_finalize(void*) __attribute__((weak));
__attribute__((destructor)) static void finalize_statics() {
  if (__cxa_finalize) __cxa_finalize(&__dso_handle);
}

extern "C" {

// The oldest C API the library calls into: KernelInfoGetAllocator (onnxruntime 1.18) is the newest
// function it uses. It takes the newest API the running onnxruntime offers from the headers' down to
// this one, and says that version in its ops, so an onnxruntime reads no op field it does not know.
constexpr uint32_t kOldestApi = 18;

// ORT's entry point (SessionOptions.register_custom_ops_library).
OrtStatus* ORT_API_CALL RegisterCustomOps(OrtSessionOptions* options, const OrtApiBase* api_base) {
  // onnxruntime 1.N offers API versions up to N: start there (asking for a newer one prints a complaint)
  uint32_t version = ORT_API_VERSION;
  unsigned major = 0, minor = 0;
  if (std::sscanf(api_base->GetVersionString(), "%u.%u", &major, &minor) == 2 && major == 1 && minor < version)
    version = minor;
  const OrtApi* api = nullptr;
  for (; version >= kOldestApi && !(api = api_base->GetApi(version)); --version) {
  }
  if (!api) {
    const OrtApi* first = api_base->GetApi(1);  // every onnxruntime has it, to say why
    return first ? first->CreateStatus(ORT_NOT_IMPLEMENTED, (std::string("tritonforge: onnxruntime ") +
                                                             api_base->GetVersionString() +
                                                             " is older than 1.18, the oldest the library runs in")
                                                                .c_str())
                 : nullptr;
  }
  Ort::InitApi(api);
  try {
    static Ort::CustomOpDomain domain = [version] {
      Ort::CustomOpDomain d{tf::kDomain};
      for (int cuda = 0; cuda < 2; ++cuda) {
        for (OrtCustomOp* op : std::initializer_list<OrtCustomOp*>{
                 &g_group_norm[cuda], &g_skip_group_norm[cuda][0], &g_skip_group_norm[cuda][1],
                 &g_skip_group_norm[cuda][2], &g_group_normalization[cuda], &g_softmax[cuda], &g_log_softmax[cuda],
                 &g_attention[cuda][0], &g_attention[cuda][1], &g_attention[cuda][2]}) {
          op->version = version;
          d.Add(op);
        }
      }
      return d;
    }();
    Ort::UnownedSessionOptions(options).Add(domain);
    return nullptr;
  } catch (const std::exception& e) {
    return api->CreateStatus(ORT_FAIL, (std::string("tritonforge: ") + e.what()).c_str());
  }
}

// What the library holds, as JSON: {"target", "archive_sha256", "kernels", "groups", "cuda": {op: [dtypes]},
// "tune_file", "tune_choices"}.
const char* TritonforgeInfo() {
  if (g_info.empty()) {
    g_info = std::string("{\"target\": \"") + tf::kTarget + "\", \"archive_sha256\": \"" + tf::kArchiveSha256 +
             "\", \"kernels\": " + std::to_string(tf::kKernelCount) + ", \"groups\": [";
    for (int g = 0; g < tf::kGroupCount; ++g) g_info += std::string(g ? ", " : "") + "\"" + tf::kGroups[g].name + "\"";
    // the dtypes each op's CUDA kernels serve (the CPU ops serve fp16, fp32 and bf16)
    const char* ops[][2] = {{"GroupNorm", nullptr}, {"SkipGroupNorm", nullptr}, {"GroupNormalization", nullptr},
                            {"Softmax", nullptr}, {"LogSoftmax", nullptr}, {"MultiHeadAttention", nullptr}};
    const int kinds[] = {tf::OP_GROUP_NORM_NHWC, tf::OP_GROUP_NORM_NHWC, tf::OP_GROUP_NORM_NCHW, tf::OP_SOFTMAX,
                         tf::OP_LOG_SOFTMAX, tf::OP_ATTENTION};
    g_info += "], \"cuda\": {";
    for (int o = 0; o < 6; ++o) {
      g_info += std::string(o ? ", " : "") + "\"" + ops[o][0] + "\": [";
      std::string seen;
      for (int g = 0; g < tf::kGroupCount; ++g) {
        std::string dt = std::string("\"") + tf::kGroups[g].dtype + "\"";
        if (tf::kGroups[g].op == kinds[o] && seen.find(dt) == std::string::npos) seen += (seen.empty() ? "" : ", ") + dt;
      }
      g_info += seen + "]";
    }
    g_info += "}";
    try {
      size_t entries = 0;
      std::string path = tf::tune_file(&entries);
      g_info += ", \"tune_file\": \"" + json_escape(path) + "\", \"tune_choices\": " + std::to_string(entries);
    } catch (const std::exception& e) {
      g_info += ", \"tune_file\": \"\", \"tune_choices\": 0, \"tune_error\": \"" + json_escape(e.what()) + "\"";
    }
    g_info += "}";
  }
  return g_info.c_str();
}

// The kernel chosen per shape so far: "<device>\t<op key>\t<signature>\t<kernel>" lines.
const char* TritonforgeChoices() {
  try {
    g_choices = tf::choices();
  } catch (const std::exception& e) {
    g_choices = std::string("# ") + e.what() + "\n";
  }
  return g_choices.c_str();
}
}
