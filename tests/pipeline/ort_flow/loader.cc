// Loads the provider as ORT loads its providers (dlopen, RTLD_LOCAL) and runs its check: every
// kernel_infos[] entry resolved with dlsym(RTLD_DEFAULT, ...) from inside the provider, as
// LoadOrtTritonKernel() does. The blobs stay out of the global scope: RTLD_DEFAULT finds them only
// from the provider's own code.
#include <dlfcn.h>

#include <cstdio>
#include <cstdlib>

int main(int argc, char** argv) {
  if (argc < 4) return 2;
  void* lib = dlopen(argv[1], RTLD_NOW | RTLD_LOCAL);
  if (lib == nullptr) {
    std::printf("dlopen failed: %s\n", dlerror());
    return 2;
  }
  if (dlsym(RTLD_DEFAULT, argv[3]) != nullptr) {
    std::printf("FAIL %s is in the global scope of an RTLD_LOCAL library\n", argv[3]);
    return 1;
  }
  using Check = int (*)(const char*, const char*);
  auto check = reinterpret_cast<Check>(dlsym(lib, "tf_check_kernels"));
  if (check == nullptr) {
    std::printf("no tf_check_kernels: %s\n", dlerror());
    return 2;
  }
  return check(argv[2], nullptr) == 0 ? 0 : 1;
}
