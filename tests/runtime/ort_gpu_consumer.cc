// ORT's loader and launcher, reduced: include the generated header, dlsym every blob, load it with
// cuModuleLoadData, register by name and group, then launch every candidate of group softmax_fp32
// whose BLOCK_SIZE covers the row with CU_LAUNCH_PARAM_BUFFER_POINTER and a packed struct that
// carries Triton's two hidden parameters. Built into a shared library like the CUDA provider.
#include <cuda.h>
#include <dlfcn.h>

#include <cmath>
#include <cstdio>
#include <string>
#include <unordered_map>
#include <vector>

#include "triton_kernel_infos.h"

namespace {

struct Meta {
  int num_warps;
  int shared;
  CUfunction func;
  std::unordered_map<std::string, int> constants;
  std::string name;
};

#define CHECK(call)                                                        \
  do {                                                                     \
    CUresult r_ = (call);                                                  \
    if (r_ != CUDA_SUCCESS) {                                              \
      const char* s_ = nullptr;                                            \
      cuGetErrorString(r_, &s_);                                           \
      std::printf("FAIL %s: %s\n", #call, s_ ? s_ : "?");                  \
      return 1;                                                            \
    }                                                                      \
  } while (0)

// ORT's softmax args struct plus the hidden global_scratch / profile_scratch slots (NULL).
struct SoftmaxArgs {
  void* out;
  const void* in;
  int in_stride;
  int out_stride;
  int n_cols;
  void* global_scratch;
  void* profile_scratch;
};

}  // namespace

extern "C" int tf_run_softmax(int batch, int n_cols) {
  CHECK(cuInit(0));
  CUdevice dev;
  CHECK(cuDeviceGet(&dev, 0));
  CUcontext ctx;
  CHECK(cuDevicePrimaryCtxRetain(&ctx, dev));
  CHECK(cuCtxSetCurrent(ctx));

  std::vector<Meta> metadata;
  std::unordered_map<std::string, std::vector<int>> groups;
  for (const auto& info : kernel_infos) {
    dlerror();
    void* blob = dlsym(RTLD_DEFAULT, info.name_start);
    const char* err = dlerror();
    if (err != nullptr || blob == nullptr) {
      std::printf("FAIL dlsym %s: %s\n", info.name_start, err ? err : "null");
      return 1;
    }
    CUmodule module;
    CHECK(cuModuleLoadData(&module, blob));
    CUfunction func;
    CHECK(cuModuleGetFunction(&func, module, info.func_name));
    groups[info.group_name].push_back(static_cast<int>(metadata.size()));
    metadata.push_back({info.num_warps, info.shared, func, info.constants, info.name});
  }
  std::printf("loaded %zu kernels\n", metadata.size());

  const size_t count = static_cast<size_t>(batch) * n_cols;
  std::vector<float> x(count), y(count);
  for (size_t i = 0; i < count; ++i) x[i] = static_cast<float>(std::sin(0.37 * i) * 4.0 + (i % 7) * 0.25);
  CUdeviceptr dx, dy;
  CHECK(cuMemAlloc(&dx, count * sizeof(float)));
  CHECK(cuMemAlloc(&dy, count * sizeof(float)));
  CHECK(cuMemcpyHtoD(dx, x.data(), count * sizeof(float)));

  int launched = 0, failed = 0;
  for (int idx : groups["softmax_fp32"]) {
    const Meta& m = metadata[idx];
    if (m.constants.at("BLOCK_SIZE") < n_cols) continue;  // ORT's IsSupported rule
    CHECK(cuMemsetD8(dy, 0xFF, count * sizeof(float)));
    SoftmaxArgs args{reinterpret_cast<void*>(dy), reinterpret_cast<const void*>(dx), n_cols, n_cols, n_cols,
                     nullptr, nullptr};
    size_t args_size = sizeof(args);
    void* config[] = {CU_LAUNCH_PARAM_BUFFER_POINTER, &args, CU_LAUNCH_PARAM_BUFFER_SIZE, &args_size,
                      CU_LAUNCH_PARAM_END};
    CHECK(cuLaunchKernel(m.func, batch, 1, 1, 32 * m.num_warps, 1, 1, m.shared, nullptr, nullptr, config));
    CHECK(cuCtxSynchronize());
    CHECK(cuMemcpyDtoH(y.data(), dy, count * sizeof(float)));
    double worst = 0;
    for (int r = 0; r < batch; ++r) {
      const float* row = x.data() + static_cast<size_t>(r) * n_cols;
      double mx = row[0], sum = 0;
      for (int c = 0; c < n_cols; ++c) mx = std::fmax(mx, row[c]);
      for (int c = 0; c < n_cols; ++c) sum += std::exp(row[c] - mx);
      for (int c = 0; c < n_cols; ++c) {
        double ref = std::exp(row[c] - mx) / sum;
        double got = y[static_cast<size_t>(r) * n_cols + c];
        double e = std::fabs(got - ref) / (1e-6 + std::fabs(ref));
        if (!(e <= worst)) worst = std::isnan(e) ? INFINITY : e;
      }
    }
    const bool ok = worst < 1e-4;
    std::printf("%s %s warps=%d shared=%d max_rel_err=%.3g\n", ok ? "OK" : "FAIL", m.name.c_str(), m.num_warps,
                m.shared, worst);
    ++launched;
    if (!ok) ++failed;
  }
  cuMemFree(dx);
  cuMemFree(dy);
  std::printf("launched %d kernels, %d failures\n", launched, failed);
  return launched > 0 && failed == 0 ? 0 : 1;
}
