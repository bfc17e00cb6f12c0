// tritonforge's custom ops for ONNX Runtime, in the domain "tritonforge": registration (RegisterCustomOps)
// of every op family (group_norm.cc, softmax.cc, attention.cc, ada_layer_norm.cc, rotary_embedding.cc,
// bias_concat.cc, bias_split_gelu.cc, linear.cc), each op twice: for the CUDA EP, where it launches the build's
// Triton kernels on the session's stream (launch.cc), and for the CPU EP, in plain C++, so the same graph runs in
// CPU sessions and tests. Also what the library holds (TritonforgeInfo) and the kernels it chose
// (TritonforgeChoices).
#include <atomic>
#include <cstdio>

#include "op_base.h"

namespace tf {

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
  // onnxruntime before 1.21 (API versions below 21) indexes past the node's outputs when told of an optional one
  // the node leaves out, an assertion that aborts the process: there only the required outputs are said (an
  // optional one a node has keeps its declared type, its shape left to be found at run time)
  if (op->version < 21)
    while (outputs > 1 && op->GetOutputCharacteristic(op, outputs - 1) == INPUT_OUTPUT_OPTIONAL) --outputs;
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


}  // namespace tf


namespace {

std::string json_escape(const std::string& s) {
  std::string out;
  for (char ch : s) {
    if (ch == '"' || ch == '\\') out += '\\';
    if (static_cast<unsigned char>(ch) >= 0x20) out += ch;
  }
  return out;
}

// What the library holds, as JSON: {"target", "archive_sha256", "kernels", "groups", "cuda": {op: [dtypes]},
// "tune_file", "tune_choices"}.
std::string info_json() {
  std::string out = std::string("{\"target\": \"") + tf::kTarget + "\", \"archive_sha256\": \"" + tf::kArchiveSha256 +
           "\", \"kernels\": " + std::to_string(tf::kKernelCount) + ", \"groups\": [";
  for (int g = 0; g < tf::kGroupCount; ++g) out += std::string(g ? ", " : "") + "\"" + tf::kGroups[g].name + "\"";
  // the dtypes each op's CUDA kernels serve (the CPU ops serve fp16, fp32 and bf16)
  const char* ops[] = {"GroupNorm", "SkipGroupNorm", "GroupNormalization", "Softmax", "LogSoftmax",
                       "MultiHeadAttention", "AdaLayerNorm", "RotaryEmbedding", "BiasConcat", "BiasSplitGelu",
                       "Fp8Linear"};  // Fp8Linear: the dtypes its activations' quantization kernels serve
  const int kinds[] = {tf::OP_GROUP_NORM_NHWC, tf::OP_GROUP_NORM_NHWC, tf::OP_GROUP_NORM_NCHW, tf::OP_SOFTMAX,
                       tf::OP_LOG_SOFTMAX, tf::OP_ATTENTION, tf::OP_ADA_LAYER_NORM, tf::OP_ROTARY_EMBEDDING,
                       tf::OP_BIAS_CONCAT, tf::OP_BIAS_SPLIT_GELU, tf::OP_FP8_QUANT_ROWS};
  out += "], \"cuda\": {";
  for (int o = 0; o < static_cast<int>(sizeof kinds / sizeof kinds[0]); ++o) {
    out += std::string(o ? ", " : "") + "\"" + ops[o] + "\": [";
    std::string seen;
    for (int g = 0; g < tf::kGroupCount; ++g) {
      std::string dt = std::string("\"") + tf::kGroups[g].dtype + "\"";
      if (tf::kGroups[g].op == kinds[o] && seen.find(dt) == std::string::npos) seen += (seen.empty() ? "" : ", ") + dt;
    }
    out += seen + "]";
  }
  out += ", \"Linear\": [\"fp32\", \"fp16\", \"bf16\"]}";  // cuBLASLt's, not the build's: every float type
  try {
    size_t entries = 0;
    std::string path = tf::tune_file(&entries);
    out += ", \"tune_file\": \"" + json_escape(path) + "\", \"tune_choices\": " + std::to_string(entries);
  } catch (const std::exception& e) {
    out += ", \"tune_file\": \"\", \"tune_choices\": 0, \"tune_error\": \"" + json_escape(e.what()) + "\"";
  }
  out += "}";
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
    size_t entries = 0;
    tf::tune_file(&entries);  // a tune file that cannot be read fails every session here, its path named
    static Ort::CustomOpDomain domain = [version] {
      Ort::CustomOpDomain d{tf::kDomain};
      for (int cuda = 0; cuda < 2; ++cuda) {
        for (auto* family : {tf::group_norm_ops, tf::softmax_ops, tf::attention_ops, tf::ada_layer_norm_ops,
                             tf::rotary_embedding_ops, tf::bias_concat_ops, tf::bias_split_gelu_ops,
                             tf::linear_ops, tf::fp8_linear_ops}) {
          for (OrtCustomOp* op : family(cuda != 0)) {
            op->version = version;
            d.Add(op);
          }
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

// What the library holds, as JSON: made once (a function-local static: threads calling at once get one
// string, made by one of them).
const char* TritonforgeInfo() {
  static const std::string info = info_json();
  return info.c_str();
}

// The kernel chosen per shape so far: "<device>\t<op key>\t<signature>\t<kernel>" lines.
// The text stays valid until the same thread calls again: each thread has its own (a plain pointer, so
// the thread-local needs no destructor registered at thread exit).
const char* TritonforgeChoices() {
  thread_local std::string* text = nullptr;
  if (!text) text = new std::string;
  try {
    *text = tf::choices();
  } catch (const std::exception& e) {
    *text = std::string("# ") + e.what() + "\n";
  }
  return text->c_str();
}
}
