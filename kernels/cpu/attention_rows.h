// One query row of attention over K/V rows read in place (f32, f16 or bf16, dense along the
// head dimension, any row stride): the fast path of sdpa. Decode reads a KV cache of hundreds of
// rows for every head of every layer, so K/V are converted in registers as they are read rather
// than packed into f32 copies first.
#pragma once

#include <cstdint>

#include "runtime/base/dtype.h"
#include "runtime/base/status.h"
#include "runtime/base/tensor.h"
#include "runtime/base/thread_pool.h"

namespace vrun {

// Whether attend_row handles this K/V dtype and these head dims on this CPU.
bool attend_row_supported(DType kv, int64_t d, int64_t dv);

// out[0, dv) = softmax(scale * q . k_j + mask[j], j < n_keys) @ v. k/v point at key row 0,
// rows k_stride / v_stride elements apart. mask (n_keys additive values) may be null. scores is
// scratch of n_keys floats. A row whose scores are all -inf gives zeros.
void attend_row(DType kv, const float* q, const void* k, int64_t k_stride, const void* v, int64_t v_stride, int64_t d,
                int64_t dv, int64_t n_keys, float scale, const float* mask, float* scores, float* out);

// Rotary embedding of x's rows into y (dense, x's shape, any float dtype): the element at index s
// along seq_axis sits at position pos + s; rows whose index along head_axis is heads or more pass
// through (heads 0: none do); rotary_dim 0 means the whole row. rope's kernel, and slice_update's
// when it rotates what it writes.
struct RopeSpec {
  int seq_axis = 0, head_axis = 0;
  int64_t pos = 0, rotary_dim = 0, heads = 0;
  bool interleaved = false;
  // Set: row s along seq_axis sits at pos + row_pos[s * row_pos_stride] (not pos + s).
  const int32_t* row_pos = nullptr;
  int64_t row_pos_stride = 1;
};
Status rope_rows(const TensorView& x, const TensorView& inv_freq, const TensorView& y, const RopeSpec& spec,
                 ThreadPool* pool);

}  // namespace vrun
