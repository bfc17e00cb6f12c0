// Launching the build's kernels on CUDA from the custom ops: the driver API opened at run time
// (libcuda.so.1: the library links no CUDA), modules loaded once per context, candidates chosen by
// their launch contracts, and per shape the fastest of them, timed on the op's own stream the first
// time that shape runs (or taken from a tune file).
#pragma once
#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <mutex>
#include <string>
#include <vector>

#include "table.h"

namespace tf {

struct RoleValues {
  uint64_t u[R_COUNT] = {};  // pointers, integers and flags
  float f[R_COUNT] = {};     // fp32 arguments (eps)
};

struct Launch;  // one kernel's launch, its arguments packed (launch.cc)

// What an op keeps between runs: the zeroed workspace contracts ask for and Triton's scratch, allocated
// through the session's allocator (alloc/release given by the op), and its last launch: a run of the
// same problem with the same arguments on the same stream fires that again, unchosen and unpacked.
class DeviceMemory {
 public:
  std::function<void*(size_t)> alloc;
  std::function<void(void*)> release;
  DeviceMemory();
  ~DeviceMemory();
  void free_all();
  // A zeroed buffer of at least `bytes` (zeroed on `stream` when new); kernels leave it zeroed.
  uint64_t workspace(size_t bytes, void* stream);
  uint64_t scratch(int kernel, size_t bytes);

  struct Last;
  std::mutex last_mu;
  std::unique_ptr<Last> last;

 private:
  std::mutex mu_;
  std::vector<std::pair<void*, size_t>> ws_;  // outgrown buffers are kept: launches may still use them
  std::map<int, std::pair<void*, size_t>> scratch_;
};

// Runs op `op` for (dtype, silu) on `problem` with arguments `roles` on `stream`. `key` names the
// problem as a tune cache does (op key and ORT's params signature). Throws std::runtime_error naming
// `what()` when no kernel of the build can run it (`what` is only called then: it is off the hot path).
void run(int op, const std::string& dtype, int silu, Problem problem, RoleValues roles, const std::string& op_key,
         const std::string& signature, DeviceMemory& memory, void* stream,
         const std::function<std::string()>& what);

// Whether work on `stream` may be timed now: tuning is on (TRITONFORGE_ORT_TUNING is not 0) and the stream
// is not being captured into a CUDA graph (a capture records launches; it cannot time them).
bool may_time(void* stream);

// The compute capability of the GPU `stream` runs on, major * 10 + minor (89 for sm_89).
int compute_capability(void* stream);

// Copies `bytes` from `src` to `dst` (device to host with `to_host`, else host to device) in order on `stream`, and
// waits for it. Throws while `stream` is being captured into a CUDA graph.
void copy_now(void* dst, const void* src, size_t bytes, bool to_host, void* stream);

// Which of `count` candidates runs fastest on `stream`, `work(i)` enqueuing candidate i there (and saying whether
// it could): each timed as replays of a CUDA graph of about 100 us of its runs, the GPU's time alone. A candidate
// whose work fails is passed over; 0 when none could be timed.
size_t fastest(void* stream, size_t count, const std::function<bool(size_t)>& work);

// The kernel names run() chose so far, "<device>\t<op key>\t<signature>\t<kernel>" lines (for tests
// and the tune file), and how run() chooses: TRITONFORGE_ORT_TUNING=0 takes the first candidate that
// can run instead of timing them; TRITONFORGE_ORT_TUNE_FILE names lines like those to start from
// (default: libtritonforge_ort.tune beside the library, when there is one).
std::string choices();

// The tune file run() starts from (see load_tune_file in launch.cc) and how many choices it holds;
// "" when there is none. Throws when TRITONFORGE_ORT_TUNE_FILE names a file that cannot be read.
std::string tune_file(size_t* entries);

}  // namespace tf
