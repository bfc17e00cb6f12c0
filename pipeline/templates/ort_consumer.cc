// A stand-in for ONNX Runtime's provider library: it includes the generated header the way
// triton_kernel.cu does, is linked with the archive under --whole-archive, exports _binary_* through a
// version script, and resolves every kernel with dlsym(RTLD_DEFAULT, ...) like LoadOrtTritonKernel().
#include <dlfcn.h>

#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>
#include <unordered_map>
#include <vector>

#include "triton_kernel_infos.h"

namespace {

const void* Resolve(const std::string& symbol, std::string* error) {
  dlerror();
  const void* ptr = dlsym(RTLD_DEFAULT, symbol.c_str());
  const char* err = dlerror();
  if (err != nullptr) *error = err;
  return ptr;
}

}  // namespace

// What each blob must be: an ELF of one machine ("190" CUDA, "224" AMDGPU), or a multi-arch container
// ("fatbin": CUDA fatbin magic 0xBA55ED50; "hipfb": clang offload bundle).
static bool BlobKindOk(const char* kind, const char* begin, size_t size, uint16_t* machine) {
  const std::string k(kind);
  if (k == "fatbin") return size > 16 && std::memcmp(begin, "\x50\xed\x55\xba", 4) == 0;
  if (k == "hipfb") return size > 32 && std::memcmp(begin, "__CLANG_OFFLOAD_BUNDLE__", 24) == 0;
  if (size <= 20 || std::memcmp(begin, "\x7f" "ELF", 4) != 0) return false;
  std::memcpy(machine, begin + 18, sizeof(*machine));
  return *machine == std::atoi(kind);
}

// Checks every kernel_infos[] entry; when dump_dir is set, writes each blob to <dump_dir>/<name>.bin and
// one line per entry, in header order, to <dump_dir>/index.tsv:
//   name \t group \t func_name \t num_warps \t shared \t bytes \t machine (0: a container) \t constants (K=V,...)
// Returns the number of failures.
extern "C" int tf_check_kernels(const char* kind, const char* dump_dir) {
  int failures = 0;
  const size_t count = sizeof(kernel_infos) / sizeof(kernel_infos[0]);
  FILE* index = nullptr;
  if (dump_dir != nullptr) {
    index = std::fopen((std::string(dump_dir) + "/index.tsv").c_str(), "w");
    if (index == nullptr) {
      std::printf("FAIL cannot write %s/index.tsv\n", dump_dir);
      return 1;
    }
  }
  for (size_t i = 0; i < count; ++i) {
    const _TritonKernelInfo& info = kernel_infos[i];
    std::string start = info.name_start;
    std::string error;
    const char* begin = static_cast<const char*>(Resolve(start, &error));
    if (begin == nullptr) {
      std::printf("FAIL %s: dlsym(%s): %s\n", info.name, start.c_str(), error.c_str());
      ++failures;
      continue;
    }
    const std::string suffix = "_start";
    std::string end_symbol = start.substr(0, start.size() - suffix.size()) + "_end";
    const char* end = static_cast<const char*>(Resolve(end_symbol, &error));
    if (end == nullptr || end <= begin) {
      std::printf("FAIL %s: no end symbol %s\n", info.name, end_symbol.c_str());
      ++failures;
      continue;
    }
    const size_t size = static_cast<size_t>(end - begin);
    uint16_t machine = 0;
    const bool kind_ok = BlobKindOk(kind, begin, size, &machine);
    // The entry point's name sits NUL-terminated in the binary's string table (in a container: in each
    // code object's, which nvfatbin and the bundle keep uncompressed).
    const std::string func(info.func_name);
    bool has_func = false;
    for (const char* p = begin; p + func.size() < end && !has_func; ++p) {
      has_func = std::memcmp(p, func.c_str(), func.size() + 1) == 0 && (p == begin || p[-1] == '\0' || p[-1] == '.');
    }
    const bool ok = kind_ok && has_func && info.num_warps > 0 && info.shared >= 0;
    std::printf("%s %s group=%s func=%s bytes=%zu machine=%u warps=%d shared=%d constants=%zu\n",
                ok ? "OK" : "FAIL", info.name, info.group_name, info.func_name, size,
                static_cast<unsigned>(machine), info.num_warps, info.shared, info.constants.size());
    if (!ok) ++failures;
    if (index != nullptr) {
      std::string constants;
      for (const auto& kv : info.constants) {
        constants += (constants.empty() ? "" : ",") + kv.first + "=" + std::to_string(kv.second);
      }
      std::fprintf(index, "%s\t%s\t%s\t%d\t%d\t%zu\t%u\t%s\n", info.name, info.group_name, info.func_name,
                   info.num_warps, info.shared, size, static_cast<unsigned>(machine), constants.c_str());
    }
    if (dump_dir != nullptr) {
      std::string path = std::string(dump_dir) + "/" + info.name + ".bin";
      FILE* f = std::fopen(path.c_str(), "wb");
      if (f == nullptr || std::fwrite(begin, 1, size, f) != size) {
        std::printf("FAIL %s: cannot write %s\n", info.name, path.c_str());
        ++failures;
      }
      if (f != nullptr) std::fclose(f);
    }
  }
  if (index != nullptr) std::fclose(index);
  std::printf("checked %zu kernels, %d failures\n", count, failures);
  return failures;
}
