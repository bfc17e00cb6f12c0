// ORT's loader and launchers, reduced: include the generated header, dlsym every blob, load it with
// cuModuleLoadData, register by name and group; then launch every candidate ORT's rules pick from
// group softmax_fp32 (BLOCK_SIZE covers the row) and GroupNormTriton_{Silu,Pass}_fp32 (c_per_group <=
// BLOCK_SIZE < 2 * c_per_group, HW_SIZE divides H*W) exactly as ORT does: CU_LAUNCH_PARAM_BUFFER_POINTER
// with ORT's own 32- and 80-byte structs (no room for Triton's hidden parameters), block 32 x num_warps,
// the header's shared memory. Built into a shared library like the CUDA provider.
#include <cuda.h>
#include <dlfcn.h>

#include <cmath>
#include <cstdint>
#include <cstdio>
#include <cstring>
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

// softmax_triton.cuh's struct: 32 bytes.
struct SoftmaxArgs {
  void* out;
  const void* in;
  int in_stride;
  int out_stride;
  int n_cols;
};
static_assert(sizeof(SoftmaxArgs) == 32, "ORT packs 32 bytes for softmax");

// group_norm_triton.cuh's struct: 80 bytes.
struct GroupNormArgs {
  const void* in;
  const void* skip;
  const void* bias;
  void* out;
  void* add_out;
  const void* gamma;
  const void* beta;
  int hw;
  int c;
  int c_per_group;
  float eps;
  bool has_skip;
  bool has_bias;
  bool broadcast_skip;
};
static_assert(sizeof(GroupNormArgs) == 80, "ORT packs 80 bytes for GroupNorm");

std::vector<Meta> metadata;
std::unordered_map<std::string, std::vector<int>> groups;

int Load() {
  if (!metadata.empty()) return 0;
  CHECK(cuInit(0));
  CUdevice dev;
  CHECK(cuDeviceGet(&dev, 0));
  CUcontext ctx;
  CHECK(cuDevicePrimaryCtxRetain(&ctx, dev));
  CHECK(cuCtxSetCurrent(ctx));

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
  return 0;
}

int Launch(const Meta& m, unsigned gx, unsigned gy, void* args, size_t args_size) {
  void* config[] = {CU_LAUNCH_PARAM_BUFFER_POINTER, args, CU_LAUNCH_PARAM_BUFFER_SIZE, &args_size,
                    CU_LAUNCH_PARAM_END};
  CHECK(cuLaunchKernel(m.func, gx, gy, 1, 32 * m.num_warps, 1, 1, m.shared, nullptr, nullptr, config));
  CHECK(cuCtxSynchronize());
  return 0;
}

// One launch's verdict: its worst relative error against the reference, within `tolerance` or not.
void Tally(const Meta& m, double worst, double tolerance, int& launched, int& failed) {
  const bool ok = worst < tolerance;
  std::printf("%s %s warps=%d shared=%d max_rel_err=%.3g\n", ok ? "OK" : "FAIL", m.name.c_str(), m.num_warps,
              m.shared, worst);
  ++launched;
  if (!ok) ++failed;
}

// Storage types as bits: fp16 and bf16 rounded to nearest even, as a host would write them.
uint16_t ToHalf(double v) {
  float f = static_cast<float>(v);
  uint32_t b;
  std::memcpy(&b, &f, 4);
  const uint32_t sign = (b >> 16) & 0x8000u, exp = (b >> 23) & 0xFFu, man = b & 0x7FFFFFu;
  if (exp == 0xFF) return static_cast<uint16_t>(sign | 0x7C00u | (man ? 0x200u : 0));
  int e = static_cast<int>(exp) - 127 + 15;
  if (e >= 31) return static_cast<uint16_t>(sign | 0x7C00u);
  if (e <= 0) {
    if (e < -10) return static_cast<uint16_t>(sign);
    const uint32_t m = man | 0x800000u;
    const int shift = 14 - e;
    uint32_t h = m >> shift;
    const uint32_t rest = m & ((1u << shift) - 1), half = 1u << (shift - 1);
    if (rest > half || (rest == half && (h & 1))) ++h;
    return static_cast<uint16_t>(sign | h);
  }
  uint32_t h = (static_cast<uint32_t>(e) << 10) | (man >> 13);
  const uint32_t rest = man & 0x1FFFu;
  if (rest > 0x1000u || (rest == 0x1000u && (h & 1))) ++h;
  return static_cast<uint16_t>(sign | h);
}
double FromHalf(uint16_t h) {
  const uint32_t sign = h >> 15, exp = (h >> 10) & 0x1F, man = h & 0x3FF;
  double v = exp == 0 ? std::ldexp(man, -24) : exp == 31 ? (man ? NAN : INFINITY) : std::ldexp(man | 0x400, exp - 25);
  return sign ? -v : v;
}
uint16_t ToBf16(double v) {
  float f = static_cast<float>(v);
  uint32_t b;
  std::memcpy(&b, &f, 4);
  if ((b & 0x7FFFFFFFu) > 0x7F800000u) return static_cast<uint16_t>((b >> 16) | 0x40);
  b += 0x7FFFu + ((b >> 16) & 1);
  return static_cast<uint16_t>(b >> 16);
}
double FromBf16(uint16_t h) {
  uint32_t b = static_cast<uint32_t>(h) << 16;
  float f;
  std::memcpy(&f, &b, 4);
  return f;
}

struct DType {
  size_t size;
  double rtol, atol;  // |got - ref| <= atol + rtol * |ref|, against a float64 reference of the stored inputs
};
const std::unordered_map<std::string, DType> kDTypes = {
    {"fp32", {4, 1e-4, 1e-6}}, {"fp16", {2, 4e-3, 2e-5}}, {"bf16", {2, 3e-2, 1e-4}}, {"fp64", {8, 1e-10, 1e-15}}};

void Store(const std::string& dt, double v, unsigned char* p) {
  if (dt == "fp32") { float f = static_cast<float>(v); std::memcpy(p, &f, 4); }
  if (dt == "fp64") std::memcpy(p, &v, 8);
  if (dt == "fp16") { uint16_t h = ToHalf(v); std::memcpy(p, &h, 2); }
  if (dt == "bf16") { uint16_t h = ToBf16(v); std::memcpy(p, &h, 2); }
}
double Read(const std::string& dt, const unsigned char* p) {
  if (dt == "fp32") { float f; std::memcpy(&f, p, 4); return f; }
  if (dt == "fp64") { double d; std::memcpy(&d, p, 8); return d; }
  uint16_t h;
  std::memcpy(&h, p, 2);
  return dt == "fp16" ? FromHalf(h) : FromBf16(h);
}

}  // namespace

// Every candidate ORT's rule picks from softmax_<dtype> for `batch` rows of `n_cols` (strides in
// elements, at least n_cols), launched with ORT's 32-byte struct. Row 0 is all -inf when batch > 2
// (torch gives NaN: so must every kernel), row 1 holds one -inf; the output, padding included, is
// poisoned first, and the padding between rows must come back untouched.
extern "C" int tf_run_softmax(const char* dtype, int batch, int n_cols, int in_stride, int out_stride) {
  if (Load() != 0) return 1;
  const std::string dt(dtype);
  if (!kDTypes.count(dt) || in_stride < n_cols || out_stride < n_cols) return 2;
  const DType t = kDTypes.at(dt);
  const size_t in_bytes = static_cast<size_t>(batch) * in_stride * t.size;
  const size_t out_bytes = static_cast<size_t>(batch) * out_stride * t.size;
  std::vector<unsigned char> x(in_bytes, 0), y(out_bytes);
  std::vector<double> xs(static_cast<size_t>(batch) * n_cols);  // the stored inputs, as doubles
  for (int r = 0; r < batch; ++r) {
    for (int c = 0; c < n_cols; ++c) {
      const size_t i = static_cast<size_t>(r) * n_cols + c;
      double v = std::sin(0.37 * i) * 4.0 + (i % 7) * 0.25;
      if ((batch > 2 && r == 0) || (r == 1 && c == n_cols / 2)) v = -INFINITY;
      Store(dt, v, x.data() + (static_cast<size_t>(r) * in_stride + c) * t.size);
      xs[i] = Read(dt, x.data() + (static_cast<size_t>(r) * in_stride + c) * t.size);
    }
  }
  CUdeviceptr dx, dy;
  CHECK(cuMemAlloc(&dx, in_bytes));
  CHECK(cuMemAlloc(&dy, out_bytes));
  CHECK(cuMemcpyHtoD(dx, x.data(), in_bytes));

  int launched = 0, failed = 0;
  for (int idx : groups["softmax_" + dt]) {
    const Meta& m = metadata[idx];
    if (m.constants.at("BLOCK_SIZE") < n_cols) continue;  // ORT's IsSupported rule
    CHECK(cuMemsetD8(dy, 0xFF, out_bytes));
    SoftmaxArgs args{reinterpret_cast<void*>(dy), reinterpret_cast<const void*>(dx), in_stride, out_stride, n_cols};
    if (Launch(m, batch, 1, &args, sizeof(args)) != 0) return 1;
    CHECK(cuMemcpyDtoH(y.data(), dy, out_bytes));
    double worst = 0;
    for (int r = 0; r < batch; ++r) {
      const double* row = xs.data() + static_cast<size_t>(r) * n_cols;
      double mx = -INFINITY, sum = 0;
      for (int c = 0; c < n_cols; ++c) mx = std::fmax(mx, row[c]);
      for (int c = 0; c < n_cols; ++c) sum += std::exp(row[c] - mx);
      for (int c = 0; c < out_stride; ++c) {
        const unsigned char* at = y.data() + (static_cast<size_t>(r) * out_stride + c) * t.size;
        if (c >= n_cols) {  // padding: still the poison
          for (size_t b = 0; b < t.size; ++b)
            if (at[b] != 0xFF) worst = INFINITY;
          continue;
        }
        const double ref = std::exp(row[c] - mx) / sum, got = Read(dt, at);
        if (std::isnan(ref)) {  // a row of -inf: NaN, like torch
          if (!std::isnan(got)) worst = INFINITY;
          continue;
        }
        const double e = std::fabs(got - ref) / (t.atol / t.rtol + std::fabs(ref));  // < rtol: within bounds
        if (!(e <= worst)) worst = std::isnan(e) ? INFINITY : e;
      }
    }
    Tally(m, worst, t.rtol, launched, failed);
  }
  cuMemFree(dx);
  cuMemFree(dy);
  std::printf("launched %d kernels, %d failures\n", launched, failed);
  return launched > 0 && failed == 0 ? 0 : 1;
}

// ORT's GroupNorm (NHWC, no skip or bias) on n images of hw pixels and c channels in `num_groups` groups.
extern "C" int tf_run_group_norm(int n, int hw, int c, int num_groups, int silu) {
  if (Load() != 0) return 1;
  const int cpg = c / num_groups;
  const size_t count = static_cast<size_t>(n) * hw * c;
  std::vector<float> x(count), y(count), gamma(c), beta(c);
  for (size_t i = 0; i < count; ++i) x[i] = static_cast<float>(std::sin(0.11 * i) * 3.0 + (i % 5) * 0.5);
  for (int i = 0; i < c; ++i) gamma[i] = 0.5f + 0.01f * i, beta[i] = 0.1f * std::cos(i);
  CUdeviceptr dx, dy, dg, db;
  CHECK(cuMemAlloc(&dx, count * sizeof(float)));
  CHECK(cuMemAlloc(&dy, count * sizeof(float)));
  CHECK(cuMemAlloc(&dg, c * sizeof(float)));
  CHECK(cuMemAlloc(&db, c * sizeof(float)));
  CHECK(cuMemcpyHtoD(dx, x.data(), count * sizeof(float)));
  CHECK(cuMemcpyHtoD(dg, gamma.data(), c * sizeof(float)));
  CHECK(cuMemcpyHtoD(db, beta.data(), c * sizeof(float)));
  // The reference, in double: variance as E[x^2] - E[x]^2, as ORT's kernel computes it.
  std::vector<double> ref(count);
  for (int img = 0; img < n; ++img) {
    for (int g = 0; g < num_groups; ++g) {
      double sum = 0, sq = 0;
      for (int p = 0; p < hw; ++p)
        for (int k = 0; k < cpg; ++k) {
          double v = x[(static_cast<size_t>(img) * hw + p) * c + g * cpg + k];
          sum += v, sq += v * v;
        }
      const double mean = sum / (static_cast<double>(hw) * cpg);
      const double rstd = 1.0 / std::sqrt(sq / (static_cast<double>(hw) * cpg) - mean * mean + 1e-5);
      for (int p = 0; p < hw; ++p)
        for (int k = 0; k < cpg; ++k) {
          const size_t i = (static_cast<size_t>(img) * hw + p) * c + g * cpg + k;
          double v = (x[i] - mean) * rstd * gamma[g * cpg + k] + beta[g * cpg + k];
          ref[i] = silu ? v / (1.0 + std::exp(-v)) : v;
        }
    }
  }
  const std::string group = std::string("GroupNormTriton_") + (silu ? "Silu" : "Pass") + "_fp32";
  int launched = 0, failed = 0;
  for (int idx : groups[group]) {
    const Meta& m = metadata[idx];
    const int block = m.constants.at("BLOCK_SIZE"), hw_size = m.constants.at("HW_SIZE");
    if (!(cpg <= block && block < 2 * cpg) || hw % hw_size != 0) continue;  // ORT's IsSupported rules
    CHECK(cuMemsetD8(dy, 0xFF, count * sizeof(float)));
    GroupNormArgs args{reinterpret_cast<const void*>(dx), nullptr, nullptr, reinterpret_cast<void*>(dy), nullptr,
                       reinterpret_cast<const void*>(dg), reinterpret_cast<const void*>(db), hw, c, cpg, 1e-5f,
                       false, false, false};
    if (Launch(m, n, num_groups, &args, sizeof(args)) != 0) return 1;
    CHECK(cuMemcpyDtoH(y.data(), dy, count * sizeof(float)));
    double worst = 0;
    for (size_t i = 0; i < count; ++i) {
      double e = std::fabs(y[i] - ref[i]) / (1e-3 + std::fabs(ref[i]));
      if (!(e <= worst)) worst = std::isnan(e) ? INFINITY : e;
    }
    Tally(m, worst, 1e-3, launched, failed);
  }
  cuMemFree(dx);
  cuMemFree(dy);
  cuMemFree(dg);
  cuMemFree(db);
  std::printf("launched %d kernels, %d failures\n", launched, failed);
  return launched > 0 && failed == 0 ? 0 : 1;
}
