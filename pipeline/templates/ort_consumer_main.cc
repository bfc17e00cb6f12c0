#include <cstdlib>

extern "C" int tf_check_kernels(const char* kind, const char* dump_dir);

int main(int argc, char** argv) {
  if (argc < 2) return 2;
  return tf_check_kernels(argv[1], argc > 2 ? argv[2] : nullptr) == 0 ? 0 : 1;
}
