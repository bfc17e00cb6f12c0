// Stand-in for ONNX Runtime's core/providers/cuda/cuda_common.h: just what its SparseAttention kernel
// sources use (Status, Stream, ORT_MAKE_STATUS, ORT_ENFORCE, CUDA_CALL_THROW), so ORT's own
// SparseAttentionParams and the generated kernels compile and launch outside ORT.
#pragma once
#include <cuda.h>

#include <cassert>
#include <cmath>
#include <mutex>
#include <sstream>
#include <stdexcept>
#include <string>

#include "contrib_ops/cuda/bert/tensorrt_fused_multihead_attention/cudaDriverWrapper.h"

namespace onnxruntime {
namespace common {
enum StatusCategory { ONNXRUNTIME = 1 };
enum StatusCode { OK = 0, FAIL = 1, INVALID_ARGUMENT = 2, NOT_IMPLEMENTED = 9 };
}  // namespace common

class Status {
 public:
  Status() = default;
  Status(common::StatusCode code, std::string msg) : code_(code), msg_(std::move(msg)) {}
  static Status OK() { return Status(); }
  bool IsOK() const { return code_ == common::OK; }
  int Code() const { return code_; }
  const std::string& ErrorMessage() const { return msg_; }

 private:
  common::StatusCode code_ = common::OK;
  std::string msg_;
};

template <typename... Args>
std::string MakeString(const Args&... args) {
  std::ostringstream s;
  (s << ... << args);
  return s.str();
}

class Stream {
 public:
  explicit Stream(CUstream handle) : handle_(handle) {}
  void* GetHandle() const { return handle_; }

 private:
  CUstream handle_;
};

// cudaGetDevice without the CUDA runtime: the device of the current context.
inline int cudaGetDevice(int* device) {
  CUdevice d = 0;
  int r = contrib::cuda::CUDADriverWrapper::GetInstance()->cuCtxGetDevice(&d);
  *device = static_cast<int>(d);
  return r;
}
}  // namespace onnxruntime

using onnxruntime::common::FAIL;
using onnxruntime::common::INVALID_ARGUMENT;
using onnxruntime::common::NOT_IMPLEMENTED;
using onnxruntime::common::ONNXRUNTIME;

#define ORT_MAKE_STATUS(category, code, ...) \
  ::onnxruntime::Status(::onnxruntime::common::code, ::onnxruntime::MakeString(__VA_ARGS__))
#define ORT_ENFORCE(cond, ...) \
  do {                         \
    if (!(cond)) throw std::runtime_error(::onnxruntime::MakeString(#cond, ": ", __VA_ARGS__)); \
  } while (0)
#define CUDA_CALL_THROW(expr) \
  do {                        \
    if ((expr) != 0) throw std::runtime_error(#expr " failed"); \
  } while (0)
