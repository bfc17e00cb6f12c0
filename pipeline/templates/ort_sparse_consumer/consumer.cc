// A consumer of ONNX Runtime's SparseAttention kernel sources that launches them as ORT's op does: ORT's
// own SparseAttentionParams (v1 and v2, from the tree being tested), its api.cc's load_ and run_ functions,
// on the caller's stream. `reps` launches back to back (for timing); errors come back as text.
#include <cstring>
#include <exception>
#include <string>

#include "contrib_ops/cuda/sparse/sparse_attention_v1/sparse_attention_v1_api.h"
#include "contrib_ops/cuda/sparse/sparse_attention_v2/sparse_attention_v2_api.h"

namespace sa = onnxruntime::contrib::cuda;

namespace {
int said(const std::string& what, char* err, int len) {
  if (err && len > 0) {
    std::strncpy(err, what.c_str(), static_cast<size_t>(len - 1));
    err[len - 1] = 0;
  }
  return 1;
}

template <typename Params>
int run(Params& p, bool bf16, int reps, char* err, int len,
        void (*load16)(int), void (*load_bf)(int), onnxruntime::Status (*run16)(Params&),
        onnxruntime::Status (*run_bf)(Params&)) {
  try {
    (bf16 ? load_bf : load16)(p.sm);
    for (int r = 0; r < reps; ++r) {
      onnxruntime::Status s = (bf16 ? run_bf : run16)(p);
      if (!s.IsOK()) return said(s.ErrorMessage(), err, len);
    }
    return 0;
  } catch (const std::exception& e) {
    return said(e.what(), err, len);
  }
}
}  // namespace

extern "C" {

// ORT's sparse_attention_v1 (prompt): q BNSH, the KV cache BNSH of max_cache rows, output BSNH.
int tf_sparse_v1(int sm, int bf16, void* stream, void* out, const void* q, const void* k, const void* v,
                 int batch, int seq, int heads, int kv_heads, int head_size, int total, int max_cache, float scale,
                 int block, const int* rows, const int* cols, int row_stride, int col_stride, int num_layout,
                 int reps, char* err, int len) {
  onnxruntime::Stream s(static_cast<CUstream>(stream));
  sa::sparse_attention_v1::SparseAttentionParams p(&s, sm, out, q, k, v, true, batch, seq, heads, kv_heads, head_size,
                                                   total, max_cache, scale, block, rows, cols, row_stride, col_stride,
                                                   num_layout);
  using namespace sa::sparse_attention_v1;
  return run(p, bf16, reps, err, len, load_sparse_attention_fp16, load_sparse_attention_bf16,
             run_sparse_attention_fp16, run_sparse_attention_bf16);
}

// ORT's sparse_attention_v2 (prompt and decoding): the same layouts, plus the per-batch spans and the query
// blocks ORT computes on the host (sparse_attention.cc), all in device memory.
int tf_sparse_v2(int sm, int bf16, void* stream, void* out, const void* q, const void* k, const void* v,
                 int batch, int seq, int heads, int kv_heads, int head_size, int total, int max_cache, float scale,
                 int block, const int* rows, const int* cols, int row_stride, int col_stride, int num_layout,
                 int active_q_blocks, const int* q_starts, const int* q_ends, const int* k_starts, const int* k_ends,
                 const int* q_batch_ids, const int* q_start_sids, int reps, char* err, int len) {
  onnxruntime::Stream s(static_cast<CUstream>(stream));
  sa::sparse_attention_v2::SparseAttentionParams p(&s, sm, out, q, k, v, true, batch, seq, heads, kv_heads, head_size,
                                                   total, max_cache, scale, block, rows, cols, row_stride, col_stride,
                                                   num_layout, active_q_blocks, q_starts, q_ends, k_starts, k_ends,
                                                   q_batch_ids, q_start_sids);
  using namespace sa::sparse_attention_v2;
  return run(p, bf16, reps, err, len, load_sparse_attention_fp16, load_sparse_attention_bf16,
             run_sparse_attention_fp16, run_sparse_attention_bf16);
}

int tf_supported(int sm) { return sa::sparse_attention_v1::is_supported_device(sm) ? 1 : 0; }
}
