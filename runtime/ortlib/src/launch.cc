#include "launch.h"

#include <cuda.h>
#include <dlfcn.h>
#include <sys/stat.h>

#include <algorithm>
#include <cerrno>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <memory>
#include <sstream>
#include <stdexcept>

namespace tf {
struct Function {
  CUfunction fn = nullptr;
  int max_threads = 0, static_shared = 0;
  int resident = -1;
  bool non_portable = false;
  std::map<int64_t, int> clusters;  // cluster size -> clusters resident at once
};

struct Launch {
  int kernel = -1;
  const GroupEntry* group = nullptr;
  Function* fn = nullptr;
  int64_t grid[3] = {1, 1, 1}, cluster[3] = {1, 1, 1};
  std::vector<unsigned char> args;
  std::vector<void*> pointers;
};

// An op's last launch and what it was packed for.
struct DeviceMemory::Last {
  CUcontext ctx = nullptr;
  CUstream stream = nullptr;
  int op = -1, silu = 0;
  std::string dtype;
  Problem problem;
  RoleValues roles;
  Launch launch;
};

DeviceMemory::DeviceMemory() = default;
DeviceMemory::~DeviceMemory() { free_all(); }

namespace {

// ---- the driver, opened on first use ------------------------------------------------------------
struct Driver {
  std::string error;  // empty when every entry point was found and cuInit succeeded
#define TF_FN(name, ...) CUresult (*name)(__VA_ARGS__) = nullptr;
  TF_FN(Init, unsigned)
  TF_FN(GetErrorName, CUresult, const char**)
  TF_FN(CtxGetCurrent, CUcontext*)
  TF_FN(CtxSetCurrent, CUcontext)
  TF_FN(CtxGetDevice, CUdevice*)
  TF_FN(StreamGetCtx, CUstream, CUcontext*)
  TF_FN(StreamIsCapturing, CUstream, CUstreamCaptureStatus*)
  TF_FN(DevicePrimaryCtxRetain, CUcontext*, CUdevice)
  TF_FN(DeviceGetAttribute, int*, CUdevice_attribute, CUdevice)
  TF_FN(DeviceGetName, char*, int, CUdevice)
  TF_FN(ModuleLoadData, CUmodule*, const void*)
  TF_FN(ModuleGetFunction, CUfunction*, CUmodule, const char*)
  TF_FN(FuncGetAttribute, int*, CUfunction_attribute, CUfunction)
  TF_FN(FuncSetAttribute, CUfunction, CUfunction_attribute, int)
  TF_FN(OccupancyMaxActiveBlocksPerMultiprocessor, int*, CUfunction, int, size_t)
  TF_FN(OccupancyMaxActiveClusters, int*, CUfunction, const CUlaunchConfig*)
  TF_FN(LaunchKernel, CUfunction, unsigned, unsigned, unsigned, unsigned, unsigned, unsigned, unsigned, CUstream,
        void**, void**)
  TF_FN(LaunchCooperativeKernel, CUfunction, unsigned, unsigned, unsigned, unsigned, unsigned, unsigned, unsigned,
        CUstream, void**)
  TF_FN(LaunchKernelEx, const CUlaunchConfig*, CUfunction, void**, void**)
  TF_FN(MemsetD8Async, CUdeviceptr, unsigned char, size_t, CUstream)
  TF_FN(MemcpyDtoHAsync, void*, CUdeviceptr, size_t, CUstream)
  TF_FN(MemcpyHtoDAsync, CUdeviceptr, const void*, size_t, CUstream)
  TF_FN(StreamSynchronize, CUstream)
  TF_FN(EventCreate, CUevent*, unsigned)
  TF_FN(EventRecord, CUevent, CUstream)
  TF_FN(EventSynchronize, CUevent)
  TF_FN(EventElapsedTime, float*, CUevent, CUevent)
  TF_FN(EventDestroy, CUevent)
  TF_FN(StreamBeginCapture, CUstream, CUstreamCaptureMode)
  TF_FN(StreamEndCapture, CUstream, CUgraph*)
  TF_FN(GraphInstantiateWithFlags, CUgraphExec*, CUgraph, unsigned long long)
  TF_FN(GraphLaunch, CUgraphExec, CUstream)
  TF_FN(GraphExecDestroy, CUgraphExec)
  TF_FN(GraphDestroy, CUgraph)
#undef TF_FN

  Driver() {
    void* lib = dlopen("libcuda.so.1", RTLD_NOW | RTLD_LOCAL);
    if (!lib) {
      error = std::string("cannot open libcuda.so.1: ") + dlerror();
      return;
    }
    auto get = [&](auto& fn, const char* symbol) {
      fn = reinterpret_cast<std::remove_reference_t<decltype(fn)>>(dlsym(lib, symbol));
      if (!fn && error.empty()) error = std::string("libcuda.so.1 has no ") + symbol;
    };
    get(Init, "cuInit");
    get(GetErrorName, "cuGetErrorName");
    get(CtxGetCurrent, "cuCtxGetCurrent");
    get(CtxSetCurrent, "cuCtxSetCurrent");
    get(CtxGetDevice, "cuCtxGetDevice");
    get(StreamGetCtx, "cuStreamGetCtx");
    get(StreamIsCapturing, "cuStreamIsCapturing");
    get(DevicePrimaryCtxRetain, "cuDevicePrimaryCtxRetain");
    get(DeviceGetAttribute, "cuDeviceGetAttribute");
    get(DeviceGetName, "cuDeviceGetName");
    get(ModuleLoadData, "cuModuleLoadData");
    get(ModuleGetFunction, "cuModuleGetFunction");
    get(FuncGetAttribute, "cuFuncGetAttribute");
    get(FuncSetAttribute, "cuFuncSetAttribute");
    get(OccupancyMaxActiveBlocksPerMultiprocessor, "cuOccupancyMaxActiveBlocksPerMultiprocessor");
    get(OccupancyMaxActiveClusters, "cuOccupancyMaxActiveClusters");
    get(LaunchKernel, "cuLaunchKernel");
    get(LaunchCooperativeKernel, "cuLaunchCooperativeKernel");
    get(LaunchKernelEx, "cuLaunchKernelEx");
    get(MemsetD8Async, "cuMemsetD8Async");
    get(MemcpyDtoHAsync, "cuMemcpyDtoHAsync_v2");
    get(MemcpyHtoDAsync, "cuMemcpyHtoDAsync_v2");
    get(StreamSynchronize, "cuStreamSynchronize");
    get(EventCreate, "cuEventCreate");
    get(EventRecord, "cuEventRecord");
    get(EventSynchronize, "cuEventSynchronize");
    get(EventElapsedTime, "cuEventElapsedTime");
    get(EventDestroy, "cuEventDestroy_v2");
    get(StreamBeginCapture, "cuStreamBeginCapture_v2");
    get(StreamEndCapture, "cuStreamEndCapture");
    get(GraphInstantiateWithFlags, "cuGraphInstantiateWithFlags");
    get(GraphLaunch, "cuGraphLaunch");
    get(GraphExecDestroy, "cuGraphExecDestroy");
    get(GraphDestroy, "cuGraphDestroy");
    if (error.empty() && Init(0) != CUDA_SUCCESS) error = "cuInit failed";
  }

  std::string name(CUresult r) const {
    const char* s = nullptr;
    return GetErrorName && GetErrorName(r, &s) == CUDA_SUCCESS && s ? s : "CUDA error " + std::to_string(r);
  }
  void check(CUresult r, const std::string& what) const {
    if (r != CUDA_SUCCESS) throw std::runtime_error(what + ": " + name(r));
  }
};

Driver& driver() {
  static Driver d;
  if (!d.error.empty()) throw std::runtime_error("the CUDA driver is not usable: " + d.error);
  return d;
}

// ---- one context: its device's limits, loaded functions, choices ------------------------------
struct Context {
  CUcontext ctx = nullptr;
  CUdevice dev = 0;
  std::string device_name;
  int sm_count = 0, max_threads = 0, max_shared_optin = 0, has_clusters = 0, capability = 0;
  int64_t max_grid[3] = {};
  std::vector<CUmodule> modules;
  std::vector<std::unique_ptr<Function>> functions;
  std::map<std::string, int> chosen;  // op key|signature -> kernel index
  std::mutex mu;
};

std::mutex g_mu;
std::map<CUcontext, std::unique_ptr<Context>> g_contexts;
std::map<std::string, std::string> g_tune_file;  // device\top\tsignature -> kernel name

std::string g_tune_path;   // where g_tune_file came from ("" when nowhere)
std::string g_tune_error;  // why the tune file could not be read: every later use fails with it, not only the first

// The tune file: $TRITONFORGE_ORT_TUNE_FILE when set (empty: none), else the .tune file beside this
// library (libtritonforge_ort.tune, shipped with a release), when there is one. A file named but unreadable
// (missing, a directory, no permission), or a line that is not device, op, signature and kernel, is an error
// naming the path, raised by this call and every later one.
void load_tune_file() {
  static bool loaded = false;
  if (loaded) {
    if (!g_tune_error.empty()) throw std::runtime_error(g_tune_error);
    return;
  }
  loaded = true;
  std::string path;
  bool named = false;
  if (const char* env = std::getenv("TRITONFORGE_ORT_TUNE_FILE")) {
    path = env;
    named = true;
  } else {
    Dl_info self = {};
    if (dladdr(reinterpret_cast<void*>(&load_tune_file), &self) && self.dli_fname) {
      path = self.dli_fname;
      if (path.size() > 3 && path.compare(path.size() - 3, 3, ".so") == 0) path.replace(path.size() - 3, 3, ".tune");
      else path.clear();
    }
  }
  if (path.empty()) return;
  const std::string said = named ? "TRITONFORGE_ORT_TUNE_FILE=" + path : "the tune file " + path;
  struct stat st = {};
  if (stat(path.c_str(), &st) != 0) {
    if (!named && errno == ENOENT) return;  // no tune file shipped beside the library: shapes are timed on first use
    g_tune_error = said + ": cannot read it (" + std::strerror(errno) + ")";
  } else if (!S_ISREG(st.st_mode)) {
    g_tune_error = said + ": not a file";
  }
  std::ifstream in;
  if (g_tune_error.empty()) {
    in.open(path);
    if (!in) g_tune_error = said + ": cannot read it (" + std::strerror(errno) + ")";
  }
  std::map<std::string, std::string> entries;
  std::string line;
  for (int number = 1; g_tune_error.empty() && std::getline(in, line); ++number) {
    if (line.empty() || line[0] == '#') continue;
    if (std::count(line.begin(), line.end(), '\t') != 3)
      g_tune_error = said + ": line " + std::to_string(number) + " is not device, op, signature and kernel separated "
                     "by tabs";
    auto last = line.rfind('\t');
    entries[line.substr(0, last)] = line.substr(last + 1);
  }
  if (!g_tune_error.empty()) throw std::runtime_error(g_tune_error);
  g_tune_path = path;
  g_tune_file = std::move(entries);
}

bool tuning_enabled() {
  const char* v = std::getenv("TRITONFORGE_ORT_TUNING");
  return !(v && std::string(v) == "0");
}

Context& context_of(CUstream stream) {
  Driver& d = driver();
  CUcontext ctx = nullptr;
  if (stream) d.check(d.StreamGetCtx(stream, &ctx), "cuStreamGetCtx");
  if (!ctx) d.check(d.CtxGetCurrent(&ctx), "cuCtxGetCurrent");
  if (!ctx) {
    d.check(d.DevicePrimaryCtxRetain(&ctx, 0), "cuDevicePrimaryCtxRetain(0)");
  }
  CUcontext current = nullptr;
  d.CtxGetCurrent(&current);
  if (current != ctx) d.check(d.CtxSetCurrent(ctx), "cuCtxSetCurrent");
  std::lock_guard<std::mutex> lock(g_mu);
  load_tune_file();
  auto& slot = g_contexts[ctx];
  if (!slot) {
    auto c = std::make_unique<Context>();
    c->ctx = ctx;
    d.check(d.CtxGetDevice(&c->dev), "cuCtxGetDevice");
    auto attr = [&](CUdevice_attribute a) {
      int v = 0;
      d.check(d.DeviceGetAttribute(&v, a, c->dev), "cuDeviceGetAttribute");
      return v;
    };
    c->sm_count = attr(CU_DEVICE_ATTRIBUTE_MULTIPROCESSOR_COUNT);
    c->max_threads = attr(CU_DEVICE_ATTRIBUTE_MAX_THREADS_PER_BLOCK);
    c->max_shared_optin = attr(CU_DEVICE_ATTRIBUTE_MAX_SHARED_MEMORY_PER_BLOCK_OPTIN);
    c->has_clusters = attr(CU_DEVICE_ATTRIBUTE_CLUSTER_LAUNCH);
    c->capability = attr(CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MAJOR) * 10 +
                    attr(CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MINOR);
    c->max_grid[0] = attr(CU_DEVICE_ATTRIBUTE_MAX_GRID_DIM_X);
    c->max_grid[1] = attr(CU_DEVICE_ATTRIBUTE_MAX_GRID_DIM_Y);
    c->max_grid[2] = attr(CU_DEVICE_ATTRIBUTE_MAX_GRID_DIM_Z);
    char name[256] = {};
    d.DeviceGetName(name, sizeof(name) - 1, c->dev);
    c->device_name = name;
    c->modules.assign(kKernelCount, nullptr);
    c->functions.resize(kKernelCount);
    slot = std::move(c);
  }
  return *slot;
}

// The function of kernel `i` in `c` (its module loaded on first use); nullptr when this device cannot
// load it (a blob without this GPU's arch), with `why` saying so.
Function* function(Context& c, int i, std::string& why) {
  Driver& d = driver();
  if (c.functions[i]) return c.functions[i].get();
  const KernelEntry& k = kKernels[i];
  CUmodule m = nullptr;
  CUresult r = d.ModuleLoadData(&m, k.start);
  if (r != CUDA_SUCCESS) {
    why = std::string(k.name) + ": cuModuleLoadData: " + d.name(r);
    return nullptr;
  }
  auto f = std::make_unique<Function>();
  d.check(d.ModuleGetFunction(&f->fn, m, k.func), std::string("cuModuleGetFunction(") + k.name + ")");
  d.FuncGetAttribute(&f->max_threads, CU_FUNC_ATTRIBUTE_MAX_THREADS_PER_BLOCK, f->fn);
  d.FuncGetAttribute(&f->static_shared, CU_FUNC_ATTRIBUTE_SHARED_SIZE_BYTES, f->fn);
  if (k.shared > 48 * 1024)
    d.check(d.FuncSetAttribute(f->fn, CU_FUNC_ATTRIBUTE_MAX_DYNAMIC_SHARED_SIZE_BYTES, k.shared),
            std::string("cuFuncSetAttribute(") + k.name + ", dynamic shared)");
  c.modules[i] = m;
  c.functions[i] = std::move(f);
  return c.functions[i].get();
}

int resident(Context& c, int i, Function& f) {
  if (f.resident < 0) {
    int per_sm = 0;
    driver().check(driver().OccupancyMaxActiveBlocksPerMultiprocessor(&per_sm, f.fn, kKernels[i].threads,
                                                                     kKernels[i].shared),
                   std::string("cuOccupancyMaxActiveBlocksPerMultiprocessor(") + kKernels[i].name + ")");
    f.resident = per_sm * c.sm_count;
  }
  return f.resident;
}

// A cuLaunchKernelEx configuration with the launch's cluster dimension (its one attribute).
struct ClusterConfig {
  CUlaunchConfig cfg = {};
  CUlaunchAttribute attr = {};
  ClusterConfig(const Launch& L, CUstream stream) {
    const KernelEntry& k = kKernels[L.kernel];
    attr.id = CU_LAUNCH_ATTRIBUTE_CLUSTER_DIMENSION;
    attr.value.clusterDim.x = static_cast<unsigned>(L.cluster[0]);
    attr.value.clusterDim.y = static_cast<unsigned>(L.cluster[1]);
    attr.value.clusterDim.z = static_cast<unsigned>(L.cluster[2]);
    cfg.gridDimX = static_cast<unsigned>(L.grid[0]);
    cfg.gridDimY = static_cast<unsigned>(L.grid[1]);
    cfg.gridDimZ = static_cast<unsigned>(L.grid[2]);
    cfg.blockDimX = k.threads;
    cfg.blockDimY = cfg.blockDimZ = 1;
    cfg.sharedMemBytes = k.shared;
    cfg.hStream = stream;
    cfg.attrs = &attr;
    cfg.numAttrs = 1;
  }
  ClusterConfig(const ClusterConfig&) = delete;  // cfg points at attr
  ClusterConfig& operator=(const ClusterConfig&) = delete;
};

// The launch's kernel-parameter pointers, into its own argument bytes.
void point(Launch& L) {
  const KernelEntry& k = kKernels[L.kernel];
  L.pointers.clear();
  for (int j = 0; j < k.n_params; ++j) L.pointers.push_back(L.args.data() + k.params[j].offset);
  for (int j = 0; j < k.n_hidden; ++j) L.pointers.push_back(L.args.data() + k.hidden[j].offset);
}

void pack(Launch& L, const RoleValues& v, DeviceMemory& memory) {
  const KernelEntry& k = kKernels[L.kernel];
  L.args.assign(std::max(k.args_size, 8), 0);
  for (int j = 0; j < k.n_params; ++j) {
    const Param& p = k.params[j];
    unsigned char* at = L.args.data() + p.offset;
    uint64_t u = v.u[p.role];
    switch (p.type) {
      case T_PTR: case T_U64: case T_I64: std::memcpy(at, &u, 8); break;
      case T_I32: case T_U32: { uint32_t x = static_cast<uint32_t>(u); std::memcpy(at, &x, 4); break; }
      case T_I1: { unsigned char x = u ? 1 : 0; *at = x; break; }
      case T_FP32: std::memcpy(at, &v.f[p.role], 4); break;
    }
  }
  int64_t programs = L.grid[0] * L.grid[1] * L.grid[2];
  for (int j = 0; j < k.n_hidden; ++j) {
    const Hidden& h = k.hidden[j];
    uint64_t ptr = 0;
    if (h.scratch_size > 0) {
      int64_t align = std::max(1, h.scratch_align);
      ptr = memory.scratch(L.kernel, programs * h.scratch_size + align);
      ptr = (ptr + align - 1) / align * align;
    }
    std::memcpy(L.args.data() + h.offset, &ptr, 8);
  }
  point(L);
}

// Fill `L` for kernel `i` of group `g`, or return why it cannot run this problem with these pointers
// on this device (empty: it can).
std::string prepare(Context& c, const GroupEntry& g, int i, Problem p, RoleValues v, DeviceMemory& memory,
                    void* stream, Launch& L) {
  const KernelEntry& k = kKernels[i];
  std::string why;
  Function* f = function(c, i, why);
  if (!f) return why;
  if (g.uses_resident) p.resident = resident(c, i, *f);
  if (!g.requires(k.constants, k.num_warps, p)) return std::string(k.name) + ": its contract does not admit it";
  if (k.threads > std::min(c.max_threads, f->max_threads)) return std::string(k.name) + ": too many threads";
  if (k.shared + f->static_shared > c.max_shared_optin) return std::string(k.name) + ": too much shared memory";
  for (int j = 0; j < k.n_params; ++j) {
    const Param& q = k.params[j];
    if (q.divisibility > 1 && v.u[q.role] % q.divisibility)
      return std::string(k.name) + ": an argument is not a multiple of " + std::to_string(q.divisibility);
    // pack() stores 32 bits of an i32 or u32 argument: a value past them is refused, never cut short
    const auto value = static_cast<int64_t>(v.u[q.role]);
    if ((q.type == T_I32 && (value < INT32_MIN || value > INT32_MAX)) ||
        (q.type == T_U32 && v.u[q.role] > UINT32_MAX))
      return std::string(k.name) + ": argument '" + q.name + "' = " + std::to_string(value) + " is past its " +
             (q.type == T_I32 ? "i32" : "u32");
  }
  L = Launch();
  L.kernel = i;
  L.group = &g;
  L.fn = f;
  g.grid(k.constants, k.num_warps, p, L.grid);
  for (int a = 0; a < 3; ++a)
    if (L.grid[a] < 1 || L.grid[a] > c.max_grid[a]) return std::string(k.name) + ": grid out of range";
  int64_t programs = L.grid[0] * L.grid[1] * L.grid[2];
  if (g.cooperative && programs > resident(c, i, *f))
    return std::string(k.name) + ": a cooperative grid larger than the device holds";
  if (g.cluster) {
    if (!c.has_clusters) return std::string(k.name) + ": the device has no thread-block clusters";
    g.cluster(k.constants, k.num_warps, p, L.cluster);
    int64_t size = L.cluster[0] * L.cluster[1] * L.cluster[2];
    for (int a = 0; a < 3; ++a)
      if (L.cluster[a] < 1 || L.grid[a] % L.cluster[a]) return std::string(k.name) + ": clusters do not divide";
    if (size > 16) return std::string(k.name) + ": clusters over 16 programs";
    if (!f->clusters.count(size)) {
      Driver& d = driver();
      if (size > 8 && !f->non_portable) {
        if (d.FuncSetAttribute(f->fn, CU_FUNC_ATTRIBUTE_NON_PORTABLE_CLUSTER_SIZE_ALLOWED, 1) != CUDA_SUCCESS)
          return std::string(k.name) + ": non-portable clusters refused";
        f->non_portable = true;
      }
      ClusterConfig c(L, nullptr);
      int n = 0;
      f->clusters[size] = d.OccupancyMaxActiveClusters(&n, f->fn, &c.cfg) == CUDA_SUCCESS ? n : 0;
    }
    if (!f->clusters[size]) return std::string(k.name) + ": its cluster does not fit on this device";
  }
  if (g.workspace) v.u[R_WS] = memory.workspace(g.workspace(k.constants, k.num_warps, p), stream);
  pack(L, v, memory);
  return "";
}

CUresult fire(const Launch& L, CUstream stream) {
  Driver& d = driver();
  const KernelEntry& k = kKernels[L.kernel];
  void** params = const_cast<void**>(L.pointers.data());
  auto gx = static_cast<unsigned>(L.grid[0]), gy = static_cast<unsigned>(L.grid[1]),
       gz = static_cast<unsigned>(L.grid[2]);
  if (L.group->cooperative)
    return d.LaunchCooperativeKernel(L.fn->fn, gx, gy, gz, k.threads, 1, 1, k.shared, stream, params);
  if (L.group->cluster) {
    ClusterConfig c(L, stream);
    return d.LaunchKernelEx(&c.cfg, L.fn->fn, params, nullptr);
  }
  return d.LaunchKernel(L.fn->fn, gx, gy, gz, k.threads, 1, 1, k.shared, stream, params, nullptr);
}

// Two events to time work on a stream between.
struct Events {
  CUevent start = nullptr, stop = nullptr;
  Events() {
    driver().check(driver().EventCreate(&start, CU_EVENT_DEFAULT), "cuEventCreate");
    driver().check(driver().EventCreate(&stop, CU_EVENT_DEFAULT), "cuEventCreate");
  }
  ~Events() {
    driver().EventDestroy(start);
    driver().EventDestroy(stop);
  }
  Events(const Events&) = delete;
  Events& operator=(const Events&) = delete;
  // Microseconds from start to stop once stop is reached; negative when it is not.
  float elapsed_us() const {
    float ms = -1;
    if (driver().EventSynchronize(stop) != CUDA_SUCCESS || driver().EventElapsedTime(&ms, start, stop) != CUDA_SUCCESS)
      return -1;
    return ms * 1000.0f;
  }
};

// Mean microseconds of `reps` runs of `work` after one warm-up; negative when a run fails. Work shorter
// than the host's launch rate is timed at that rate here: time_graph is what tuning uses.
float time_plain(const std::function<bool()>& work, CUstream stream, int reps) {
  Driver& d = driver();
  if (!work()) return -1;
  Events e;
  d.EventRecord(e.start, stream);
  for (int r = 0; r < reps; ++r)
    if (!work()) return -1;
  d.EventRecord(e.stop, stream);
  float us = e.elapsed_us();
  return us >= 0 ? us / reps : -1;
}

// Microseconds per run of `n` runs of `work` captured into one CUDA graph, the fastest of 3 replays after a
// warm-up: the GPU's time alone, however short the kernel. Negative when the stream cannot be captured (the
// legacy stream) or the work cannot be (a driver without cooperative or cluster capture).
float time_graph(const std::function<bool()>& work, CUstream stream, int n) {
  Driver& d = driver();
  if (!stream || d.StreamBeginCapture(stream, CU_STREAM_CAPTURE_MODE_THREAD_LOCAL) != CUDA_SUCCESS) return -1;
  bool ok = true;
  for (int r = 0; r < n && ok; ++r) ok = work();
  CUgraph graph = nullptr;
  ok = d.StreamEndCapture(stream, &graph) == CUDA_SUCCESS && ok && graph;
  CUgraphExec exec = nullptr;
  ok = ok && d.GraphInstantiateWithFlags(&exec, graph, 0) == CUDA_SUCCESS;
  float best = -1;
  if (ok && d.GraphLaunch(exec, stream) == CUDA_SUCCESS) {
    Events e;
    for (int r = 0; r < 3; ++r) {
      d.EventRecord(e.start, stream);
      if (d.GraphLaunch(exec, stream) != CUDA_SUCCESS) break;
      d.EventRecord(e.stop, stream);
      float us = e.elapsed_us();
      if (us >= 0 && (best < 0 || us < best)) best = us;
    }
  }
  if (exec) d.GraphExecDestroy(exec);
  if (graph) d.GraphDestroy(graph);
  return best >= 0 ? best / n : -1;
}

void launch_or_throw(const Launch& L, CUstream stream, const std::function<std::string()>& what) {
  CUresult r = fire(L, stream);
  if (r != CUDA_SUCCESS)
    throw std::runtime_error(what() + ": launching " + kKernels[L.kernel].name + ": " + driver().name(r));
}

}  // namespace

int compute_capability(void* stream) { return context_of(static_cast<CUstream>(stream)).capability; }

void copy_now(void* dst, const void* src, size_t bytes, bool to_host, void* stream_) {
  Driver& d = driver();
  auto stream = static_cast<CUstream>(stream_);
  context_of(stream);  // its context current
  CUstreamCaptureStatus capturing = CU_STREAM_CAPTURE_STATUS_NONE;
  d.check(d.StreamIsCapturing(stream, &capturing), "cuStreamIsCapturing");
  if (capturing != CU_STREAM_CAPTURE_STATUS_NONE)
    throw std::runtime_error("a copy between host and GPU cannot be captured into a CUDA graph: run the model once "
                             "before capturing it");
  d.check(to_host ? d.MemcpyDtoHAsync(dst, reinterpret_cast<CUdeviceptr>(src), bytes, stream)
                  : d.MemcpyHtoDAsync(reinterpret_cast<CUdeviceptr>(dst), src, bytes, stream),
          to_host ? "cuMemcpyDtoHAsync" : "cuMemcpyHtoDAsync");
  d.check(d.StreamSynchronize(stream), "cuStreamSynchronize");
}

bool may_time(void* stream_) {
  if (!tuning_enabled()) return false;
  CUstreamCaptureStatus capturing = CU_STREAM_CAPTURE_STATUS_NONE;
  return driver().StreamIsCapturing(static_cast<CUstream>(stream_), &capturing) == CUDA_SUCCESS &&
         capturing == CU_STREAM_CAPTURE_STATUS_NONE;
}

size_t fastest(void* stream_, size_t count, const std::function<bool(size_t)>& work) {
  auto stream = static_cast<CUstream>(stream_);
  size_t best = 0;
  float best_us = -1;
  for (size_t i = 0; i < count; ++i) {
    auto run_i = [&] { return work(i); };
    // one plain run sizes a graph of about 100 us of work; plain runs where the graph cannot be made
    float once = time_plain(run_i, stream, 1);
    if (once < 0) continue;
    int n = std::max(1, std::min(32, static_cast<int>(100.0f / std::max(once, 1.0f))));
    float us = time_graph(run_i, stream, n);
    if (us < 0) us = time_plain(run_i, stream, 5);
    if (us >= 0 && (best_us < 0 || us < best_us)) {
      best_us = us;
      best = i;
    }
  }
  return best;
}

void DeviceMemory::free_all() {
  {
    std::lock_guard<std::mutex> held(last_mu);
    last.reset();  // its arguments point into what is freed here
  }
  std::lock_guard<std::mutex> lock(mu_);
  if (release) {
    for (auto& b : ws_) release(b.first);
    for (auto& s : scratch_)
      if (s.second.first) release(s.second.first);
  }
  ws_.clear();
  scratch_.clear();
}

uint64_t DeviceMemory::workspace(size_t bytes, void* stream) {
  std::lock_guard<std::mutex> lock(mu_);
  if (ws_.empty() || ws_.back().second < bytes) {
    size_t size = std::max(bytes, ws_.empty() ? size_t(1) << 16 : 2 * ws_.back().second);
    void* p = alloc(size);
    if (!p) throw std::runtime_error("cannot allocate a " + std::to_string(size) + "-byte workspace");
    driver().check(driver().MemsetD8Async(reinterpret_cast<CUdeviceptr>(p), 0, size, static_cast<CUstream>(stream)),
                   "cuMemsetD8Async(workspace)");
    ws_.emplace_back(p, size);
  }
  return reinterpret_cast<uint64_t>(ws_.back().first);
}

uint64_t DeviceMemory::scratch(int kernel, size_t bytes) {
  std::lock_guard<std::mutex> lock(mu_);
  auto& s = scratch_[kernel];
  if (s.second < bytes) {
    if (s.first) release(s.first);  // only Triton's per-launch scratch: nothing outlives the launch
    s.first = alloc(bytes);
    if (!s.first) throw std::runtime_error("cannot allocate " + std::to_string(bytes) + " bytes of scratch");
    s.second = bytes;
  }
  return reinterpret_cast<uint64_t>(s.first);
}

namespace {

bool same(const Problem& a, const Problem& b) { return std::memcmp(&a, &b, sizeof a) == 0; }
bool same(const RoleValues& a, const RoleValues& b) {
  return std::memcmp(a.u, b.u, sizeof a.u) == 0 && std::memcmp(a.f, b.f, sizeof a.f) == 0;
}

// Fire `L` and keep it as the op's last launch.
void fire_and_keep(Launch&& L, const Context& c, CUstream stream, int op, const std::string& dtype, int silu,
                   const Problem& problem, const RoleValues& roles, DeviceMemory& memory,
                   const std::function<std::string()>& what) {
  launch_or_throw(L, stream, what);
  auto last = std::make_unique<DeviceMemory::Last>();
  last->ctx = c.ctx, last->stream = stream, last->op = op, last->silu = silu, last->dtype = dtype;
  last->problem = problem, last->roles = roles, last->launch = std::move(L);
  point(last->launch);
  std::lock_guard<std::mutex> lock(memory.last_mu);
  memory.last = std::move(last);
}

}  // namespace

void run(int op, const std::string& dtype, int silu, Problem problem, RoleValues roles, const std::string& op_key,
         const std::string& signature, DeviceMemory& memory, void* stream_,
         const std::function<std::string()>& what) {
  auto stream = static_cast<CUstream>(stream_);
  Driver& d = driver();
  {
    // The op's last launch, when nothing it was packed for has changed: no choosing, packing or key lookup.
    CUcontext current = nullptr;
    d.CtxGetCurrent(&current);
    std::lock_guard<std::mutex> lock(memory.last_mu);
    const DeviceMemory::Last* last = memory.last.get();
    if (last && current && last->ctx == current && last->stream == stream && last->op == op &&
        last->silu == silu && last->dtype == dtype && same(last->problem, problem) && same(last->roles, roles)) {
      launch_or_throw(last->launch, stream, what);
      return;
    }
  }
  Context& c = context_of(stream);
  std::lock_guard<std::mutex> lock(c.mu);
  const std::string key = op_key + "\t" + signature;
  Launch L;
  auto chosen = c.chosen.find(key);
  if (chosen != c.chosen.end()) {
    int i = chosen->second;
    for (int g = 0; g < kGroupCount; ++g) {
      if (i >= kGroups[g].first && i < kGroups[g].first + kGroups[g].count) {
        if (prepare(c, kGroups[g], i, problem, roles, memory, stream, L).empty()) {
          fire_and_keep(std::move(L), c, stream, op, dtype, silu, problem, roles, memory, what);
          return;
        }
        break;  // these pointers rule it out (alignment): choose again
      }
    }
  }
  // Every candidate, in table order with the correctness fallbacks last; a tune file's pick first.
  std::string wanted;
  auto from_file = g_tune_file.find(c.device_name + "\t" + key);
  if (from_file != g_tune_file.end()) wanted = from_file->second;
  std::vector<Launch> ready;
  std::vector<std::string> reasons;
  for (int pass = 0; pass < 2; ++pass) {
    for (int g = 0; g < kGroupCount; ++g) {
      const GroupEntry& G = kGroups[g];
      if (G.op != op || dtype != G.dtype || (G.silu >= 0 && G.silu != silu) || G.fallback != (pass == 1)) continue;
      for (int i = G.first; i < G.first + G.count; ++i) {
        Launch cand;
        std::string why = prepare(c, G, i, problem, roles, memory, stream, cand);
        if (!why.empty()) {
          if (reasons.size() < 3 && why.find("does not admit") == std::string::npos) reasons.push_back(why);
          continue;
        }
        if (wanted == kKernels[i].name) {
          c.chosen[key] = i;
          fire_and_keep(std::move(cand), c, stream, op, dtype, silu, problem, roles, memory, what);
          return;
        }
        ready.push_back(std::move(cand));
      }
    }
  }
  if (ready.empty()) {
    std::string msg = what() + ": no kernel of this build runs it";
    for (auto& r : reasons) msg += "; " + r;
    throw std::runtime_error(msg);
  }
  size_t best = 0;
  if (ready.size() > 1 && may_time(stream))
    best = fastest(stream, ready.size(), [&](size_t j) { return fire(ready[j], stream) == CUDA_SUCCESS; });
  c.chosen[key] = ready[best].kernel;
  fire_and_keep(std::move(ready[best]), c, stream, op, dtype, silu, problem, roles, memory, what);
}

std::string tune_file(size_t* entries) {
  std::lock_guard<std::mutex> lock(g_mu);
  load_tune_file();
  *entries = g_tune_file.size();
  return g_tune_path;
}

std::string choices() {
  std::lock_guard<std::mutex> lock(g_mu);
  std::ostringstream out;
  for (auto& kv : g_contexts) {
    std::lock_guard<std::mutex> held(kv.second->mu);
    for (auto& ch : kv.second->chosen)
      out << kv.second->device_name << '\t' << ch.first << '\t' << kKernels[ch.second].name << '\n';
  }
  return out.str();
}

}  // namespace tf
