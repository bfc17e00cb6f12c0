// The kernels a build holds, as the custom-op library sees them: written by pipeline/package/ortlib.py from the
// build's kernels.json into kernel_table.inc, which defines the arrays declared here. Contract
// expressions (grid, requires, cluster, workspace) are compiled to functions of the kernel's
// constants (`k`, in the order the table lists them), its warps and the problem.
#pragma once
#include <cstdint>

namespace tf {

// The roles of kernel arguments (the `params` of a launch contract). pipeline/package/ortlib.py reads this
// list, so every role a contract may use is named once, here.
enum Role : int {
  R_IN, R_OUT, R_SKIP, R_BIAS, R_ADD_OUT, R_GAMMA, R_BETA, R_WS, R_NCHW_SCALE, R_NCHW_BIAS,
  R_HW, R_C, R_C_PER_GROUP, R_GROUPS, R_EPS, R_HAS_SKIP, R_HAS_BIAS, R_BROADCAST_SKIP,
  R_IN_STRIDE, R_OUT_STRIDE, R_N_COLS, R_BATCH,
  R_Q, R_K, R_V, R_SCALE, R_Q_BATCH_STRIDE, R_Q_HEAD_STRIDE, R_Q_SEQ_STRIDE, R_K_BATCH_STRIDE, R_K_HEAD_STRIDE,
  R_K_SEQ_STRIDE, R_V_BATCH_STRIDE, R_V_HEAD_STRIDE, R_V_SEQ_STRIDE, R_OUT_BATCH_STRIDE, R_OUT_HEAD_STRIDE,
  R_OUT_SEQ_STRIDE, R_HEADS, R_KV_GROUP, R_SQ, R_SKV, R_HEAD_DIM,
  R_MOD_SCALE, R_MOD_SHIFT, R_GATE, R_ROWS_PER_ITEM, R_COS, R_SIN, R_POSITIONS, R_ROWS_PER_POSITION,
  R_CLIP_LO, R_CLIP_HI, R_IN_B, R_BIAS_B, R_SEQ_A, R_SEQ_B, R_GAMMA_B, R_ROWS_PER_TOKEN, R_ROW_SCALE,
  R_COUNT
};

enum ArgType : int { T_PTR, T_I32, T_I64, T_I1, T_FP32, T_U32, T_U64 };

enum OpKind : int { OP_GROUP_NORM_NHWC, OP_GROUP_NORM_NCHW, OP_SOFTMAX, OP_LOG_SOFTMAX, OP_ATTENTION, OP_ADA_LAYER_NORM,
                   OP_ROTARY_EMBEDDING, OP_BIAS_CONCAT, OP_BIAS_SPLIT_GELU, OP_FP8_QUANT_ROWS };

struct Param {
  int role, type, offset, divisibility;
  const char* name;  // the kernel's own name for it, for errors
};

struct Hidden {  // a parameter Triton adds (global / profile scratch): NULL unless it has a size
  int offset;
  int64_t scratch_size;
  int scratch_align;
};

// Problem variables, as the contracts name them.
struct Problem {
  int64_t n = 0, hw = 0, c = 0, groups = 0, c_per_group = 0, silu = 0;
  int64_t batch = 0, n_cols = 0, in_stride = 0, out_stride = 0;
  int64_t heads = 0, sq = 0, skv = 0, head_dim = 0, strides8 = 0;  // attention (batch above)
  int64_t resident = 0;  // programs of this kernel the device holds at once (cooperative kernels)
};

using RequiresFn = bool (*)(const int64_t* k, int64_t num_warps, const Problem& p);
using DimsFn = void (*)(const int64_t* k, int64_t num_warps, const Problem& p, int64_t out[3]);
using SizeFn = int64_t (*)(const int64_t* k, int64_t num_warps, const Problem& p);

struct KernelEntry {
  const char* name;
  const char* func;
  const unsigned char* start;
  const unsigned char* end;
  int threads, shared, args_size, num_warps;
  int n_params;
  const Param* params;
  int n_hidden;
  const Hidden* hidden;
  const int64_t* constants;
};

struct GroupEntry {
  const char* name;
  int op;             // OpKind
  const char* dtype;  // fp16, fp32, bf16
  int silu;           // GroupNorm: 1 Silu, 0 Pass; attention: 1 causal, 0 not; AdaLN: its form; softmax: -1
  int first, count;   // kernels [first, first + count) of kKernels
  RequiresFn requires;
  DimsFn grid;
  DimsFn cluster;    // nullptr: a plain launch
  SizeFn workspace;  // nullptr: no zeroed workspace
  bool cooperative, fallback, uses_resident;
};

extern const KernelEntry kKernels[];
extern const int kKernelCount;
extern const GroupEntry kGroups[];
extern const int kGroupCount;
extern const char kArchiveSha256[];
extern const char kTarget[];

}  // namespace tf
