// What the cuBLASLt-backed Linear ops share (linear.cc, fp8_linear.cc): the activation attribute, the node's
// cuBLASLt handle and its plans per shape and alignments, guarded by one mutex (a session's threads share them).
#pragma once
#include <map>
#include <memory>
#include <mutex>

#include "cublas_lt.h"
#include "op_base.h"

namespace tf {

template <class Key>
class LtKernel : public KernelBase {
 public:
  LtKernel(const OrtKernelInfo* info, const char* op, bool cuda) : KernelBase(info, op, cuda) {
    const std::string act = attr_string(info, "activation", "none");
    if (act != "none" && act != "gelu_tanh")
      throw Ort::Exception(std::string(kDomain) + "." + op + " node '" + node_ + "': activation '" + act +
                               "' is not one of none, gelu_tanh",
                           ORT_INVALID_ARGUMENT);
    gelu_ = act == "gelu_tanh";
  }
  ~LtKernel() override {
    std::lock_guard<std::mutex> lock(mu_);
    plans_.clear();
    if (handle_) cublas_lt().Destroy(handle_);
  }

 protected:
  static constexpr int kLtWorkspace = -3;  // the node's DeviceMemory scratch key: below Triton's kernel indices

  // D = A B by `plan` with pick `h` on `st` (alpha 1, beta 0; C is D), its workspace the node's.
  LtStatus matmul(const LtPlan& plan, const LtHeuristic& h, const void* a, const void* b, void* d, void* st) {
    void* workspace = h.workspace ? reinterpret_cast<void*>(memory_.scratch(kLtWorkspace, h.workspace)) : nullptr;
    const float one = 1.0f, zero = 0.0f;
    return plan.lt->Matmul(handle_, plan.desc, &one, a, plan.a, b, plan.b, &zero, d, plan.d, d, plan.d, &h.algo,
                           workspace, h.workspace, st);
  }

  // Y, X's shape with N last, once the bias is checked: N values of X's type.
  Ort::UnownedValue output_for(Ort::KernelContext& ctx, const Ort::ConstValue& bias, const Input& in, int64_t n) {
    if (float_type(bias, "bias") != in.dtype) bad("input bias's element type differs from X's");
    const auto bs = bias.GetTensorTypeAndShapeInfo().GetShape();
    if (product(bs) != n || (!bs.empty() && bs.back() != n))
      bad("input bias has shape " + shape_str(bs) + "; expected (" + std::to_string(n) + "), W's N");
    std::vector<int64_t> ys = in.shape;
    ys.back() = n;
    return ctx.GetOutput(0, ys);
  }

  bool gelu_ = false;
  std::mutex mu_;
  LtHandle handle_ = nullptr;
  std::map<Key, std::unique_ptr<LtPlan>> plans_;
};

}  // namespace tf
