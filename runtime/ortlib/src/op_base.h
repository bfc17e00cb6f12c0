// What every op family of tritonforge's custom-op library shares: the element helpers, the kernel base
// (node name, attributes, device memory, bad input as an ORT status that names op and node) and the op
// declaration base. Each family is one file (group_norm.cc, softmax.cc, attention.cc, ada_layer_norm.cc,
// rotary_embedding.cc, bias_concat.cc, bias_split_gelu.cc, linear.cc) that
// hands its ops to ops.cc, which registers them in the domain "tritonforge".
#pragma once
#define ORT_API_MANUAL_INIT
#include <onnxruntime_cxx_api.h>
#undef ORT_API_MANUAL_INIT

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

inline constexpr const char* kDomain = "tritonforge";
inline constexpr const char* kCuda = "CUDAExecutionProvider";
inline constexpr ONNXTensorElementDataType kFloats[] = {ONNX_TENSOR_ELEMENT_DATA_TYPE_FLOAT,
                                                        ONNX_TENSOR_ELEMENT_DATA_TYPE_FLOAT16,
                                                        ONNX_TENSOR_ELEMENT_DATA_TYPE_BFLOAT16};

struct BadInput : std::runtime_error {
  using std::runtime_error::runtime_error;
};

inline std::string dtype_name(ONNXTensorElementDataType t) {
  switch (t) {
    case ONNX_TENSOR_ELEMENT_DATA_TYPE_FLOAT: return "fp32";
    case ONNX_TENSOR_ELEMENT_DATA_TYPE_FLOAT16: return "fp16";
    case ONNX_TENSOR_ELEMENT_DATA_TYPE_BFLOAT16: return "bf16";
    default: return "";
  }
}

inline std::string shape_str(const std::vector<int64_t>& s) {
  std::ostringstream o;
  o << "(";
  for (size_t i = 0; i < s.size(); ++i) o << (i ? ", " : "") << s[i];
  o << ")";
  return o.str();
}

inline int64_t product(const std::vector<int64_t>& s, size_t from = 0, size_t to = SIZE_MAX) {
  int64_t p = 1;
  for (size_t i = from; i < std::min(to, s.size()); ++i) p *= s[i];
  return p;
}

// Element access for the CPU paths, as float.
inline float load(const void* p, ONNXTensorElementDataType t, int64_t i) {
  if (t == ONNX_TENSOR_ELEMENT_DATA_TYPE_FLOAT) return static_cast<const float*>(p)[i];
  if (t == ONNX_TENSOR_ELEMENT_DATA_TYPE_FLOAT16) return static_cast<const Ort::Float16_t*>(p)[i].ToFloat();
  return static_cast<const Ort::BFloat16_t*>(p)[i].ToFloat();
}

inline void store(void* p, ONNXTensorElementDataType t, int64_t i, float v) {
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

  static std::string attr_string(const OrtKernelInfo* info, const char* name, const std::string& dflt) {
    size_t size = 0;
    OrtStatus* s = Ort::GetApi().KernelInfoGetAttribute_string(info, name, nullptr, &size);
    if (s) {
      Ort::GetApi().ReleaseStatus(s);
      return dflt;
    }
    std::string v(size, '\0');
    Ort::ThrowOnError(Ort::GetApi().KernelInfoGetAttribute_string(info, name, &v[0], &size));
    v.resize(size ? size - 1 : 0);  // the size counts the terminating NUL
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

// X's type and shape as ORT is told it, unknown dims named (ops.cc; the caller releases it).
OrtStatusPtr shape_of_x(OrtShapeInferContext* ctx, OrtTensorTypeAndShapeInfo** out);

// Y is X's shape with the Linear weight's dim `n_axis` last, named `symbol` where W does not fix it (linear.cc).
OrtStatusPtr shape_n_from_w(OrtShapeInferContext* ctx, int n_axis, const char* symbol);

// Y (M, N) = act(X (M, K) W (K, N, doubles) + bias (N)) on the CPU, in double; act GELU-tanh where `gelu` (linear.cc).
// X is read as `t` (bias and Y's type), or from `xf` where given (floats, M x K).
void linear_cpu(const void* x, const std::vector<double>& w, const void* b, void* y, ONNXTensorElementDataType t,
                int64_t m, int64_t k, int64_t n, bool gelu, const float* xf = nullptr);

// Every output has X's type and shape (ops.cc).
OrtStatusPtr same_as_x(const OrtCustomOp* op, OrtShapeInferContext* ctx);

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

// An op declared once per element type the model may give it (kFloats; onnxruntime before 1.21 accepts only one
// input of a type left to the model when an output's follows it): every input and output of that type unless the
// op says otherwise, its kernel made as Kernel(info, cuda).
template <typename Op, typename Kernel>
struct TypedOp : OpBase<Op, Kernel> {
  TypedOp(bool cuda, ONNXTensorElementDataType type) : OpBase<Op, Kernel>(cuda), type_(type) {}
  ONNXTensorElementDataType GetInputType(size_t) const { return type_; }
  ONNXTensorElementDataType GetOutputType(size_t) const { return type_; }
  Kernel* Make(const OrtKernelInfo* info) const { return new Kernel(info, this->cuda_); }
  ONNXTensorElementDataType type_;
};

// The three typed declarations of Op for one EP, alive as long as the library.
template <typename Op>
std::vector<OrtCustomOp*> typed_ops(bool cuda) {
  static Op ops[2][3] = {{Op(false, kFloats[0]), Op(false, kFloats[1]), Op(false, kFloats[2])},
                         {Op(true, kFloats[0]), Op(true, kFloats[1]), Op(true, kFloats[2])}};
  return {&ops[cuda][0], &ops[cuda][1], &ops[cuda][2]};
}

#define TF_IO(inputs, outputs)                                                                             \
  size_t GetInputTypeCount() const { return inputs; }                                                      \
  size_t GetOutputTypeCount() const { return outputs; }                                                    \
  ONNXTensorElementDataType GetOutputType(size_t) const { return ONNX_TENSOR_ELEMENT_DATA_TYPE_UNDEFINED; }


// Each family's op declarations, for the CUDA EP (cuda) or the CPU EP, registered by ops.cc.
std::vector<OrtCustomOp*> group_norm_ops(bool cuda);
std::vector<OrtCustomOp*> softmax_ops(bool cuda);
std::vector<OrtCustomOp*> attention_ops(bool cuda);
std::vector<OrtCustomOp*> ada_layer_norm_ops(bool cuda);
std::vector<OrtCustomOp*> rotary_embedding_ops(bool cuda);
std::vector<OrtCustomOp*> bias_concat_ops(bool cuda);
std::vector<OrtCustomOp*> bias_split_gelu_ops(bool cuda);
std::vector<OrtCustomOp*> linear_ops(bool cuda);
std::vector<OrtCustomOp*> fp8_linear_ops(bool cuda);

}  // namespace tf
