// The CPU kernel interface. Every op in ops.def has a CPU kernel (view ops excepted: they are
// computed by compute_view). Kernels receive inputs as strided views (dense where ops.def marks
// an input '!'), and dense outputs already shaped by infer_shapes.
#pragma once

#include <array>

#include "kernels/ops/attrs.h"
#include "runtime/base/status.h"
#include "runtime/base/tensor.h"
#include "runtime/base/thread_pool.h"

namespace vrun {

struct KernelCall {
  OpKind op;
  const TensorView* in = nullptr;  // in[k].present() is false for an absent optional input
  int n_in = 0;
  TensorView* out = nullptr;  // dense, shaped; out[0] is in[0] for ops that write it in place (slice_update, decode_layer)
  int n_out = 0;
  const Attrs* attrs = nullptr;
  ThreadPool* pool = nullptr;

  const TensorView& input(int k) const { return in[k]; }
  bool has_input(int k) const { return k < n_in && in[k].present(); }
  // An optional i32 [1] input (a position or length held on the device): its value, or `absent`.
  int64_t scalar_input(int k, int64_t absent) const {
    return has_input(k) ? *static_cast<const int32_t*>(in[k].data) : absent;
  }
  // Element i of the i32 vector input k (one device position per row or per batch entry).
  int64_t vector_input(int k, int64_t i) const {
    const TensorView& v = in[k];
    return static_cast<const int32_t*>(v.data)[i * (v.rank() > 0 ? v.strides[v.rank() - 1] : 0)];
  }
  // Entries of input k (0 when absent).
  int64_t input_numel(int k) const { return has_input(k) ? in[k].numel() : 0; }
  const Attrs& attr() const { return *attrs; }
};

using CpuKernelFn = Status (*)(const KernelCall& call);

class CpuKernelTable {
 public:
  void set(OpKind op, CpuKernelFn fn) { fns_[static_cast<int>(op)] = fn; }
  CpuKernelFn get(OpKind op) const { return fns_[static_cast<int>(op)]; }

 private:
  std::array<CpuKernelFn, kNumOps> fns_{};
};

// The table with every family registered.
const CpuKernelTable& cpu_kernels();

// Per-family registration (kernels/cpu/<family>.cpp).
void register_cpu_elementwise(CpuKernelTable& t);  // unary + binary
void register_cpu_reduce(CpuKernelTable& t);
void register_cpu_norm(CpuKernelTable& t);
void register_cpu_linalg(CpuKernelTable& t);  // linear, bmm
void register_cpu_attention(CpuKernelTable& t);  // sdpa, rope
void register_cpu_decode_block(CpuKernelTable& t);  // decode_block: the attention kernels composed
void register_cpu_conv(CpuKernelTable& t);
void register_cpu_data(CpuKernelTable& t);  // copy, concat, pad, embedding, slice_update, glu
void register_cpu_rnn(CpuKernelTable& t);

}  // namespace vrun
