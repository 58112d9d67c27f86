// Which ops the Vulkan kernels run, and the per-family recording functions behind
// Recorder::record. Everything supports() refuses runs on the CPU backend with transfers.
#pragma once

#include <string>
#include <vector>

#include "kernels/ops/attrs.h"
#include "kernels/vulkan/recorder.h"
#include "kernels/vulkan/shaders/eltwise_ops.h"
#include "runtime/base/status.h"
#include "runtime/base/tensor.h"

namespace vrun::vulkan {

class Context;

// inputs[k] is nullptr for an absent optional input. Decided from dtypes, ranks and attributes
// (not strides): a layout a kernel cannot read directly is copied to a dense scratch tensor
// inside the recording.
bool supports(const Context& ctx, OpKind op, const std::vector<const TensorDesc*>& inputs, const Attrs& attrs);

// Dtype classes the support predicates share.
inline bool is_act(DType t) { return t == DType::f32 || t == DType::f16 || t == DType::bf16; }
inline bool is_weight(DType t) { return is_act(t) || t == DType::q8_0 || t == DType::q4_0 || t == DType::q4_1; }
inline bool is_index(DType t) { return t == DType::i32 || t == DType::i64; }
// Plain dtypes the raw copy kernel moves bit-exactly.
inline bool is_copyable(DType t) { return !is_quantized(t) && t != DType::f64; }
// inputs[k], or null when absent.
inline const TensorDesc* input_at(const std::vector<const TensorDesc*>& v, size_t k) { return k < v.size() ? v[k] : nullptr; }

// Per-family support predicates, each beside its family's recording code (ops_<family>.cpp):
// whether the family's kernels run `op` on these inputs (x = inputs[0], present).
using SupportFn = bool (*)(const Context&, OpKind, const std::vector<const TensorDesc*>&, const Attrs&);
bool supports_elementwise(const Context&, OpKind, const std::vector<const TensorDesc*>&, const Attrs&);
bool supports_norm(const Context&, OpKind, const std::vector<const TensorDesc*>&, const Attrs&);
bool supports_reduce(const Context&, OpKind, const std::vector<const TensorDesc*>&, const Attrs&);
bool supports_linalg(const Context&, OpKind, const std::vector<const TensorDesc*>&, const Attrs&);
bool supports_attention(const Context&, OpKind, const std::vector<const TensorDesc*>&, const Attrs&);
bool supports_conv(const Context&, OpKind, const std::vector<const TensorDesc*>&, const Attrs&);
bool supports_rnn(const Context&, OpKind, const std::vector<const TensorDesc*>&, const Attrs&);
bool supports_data(const Context&, OpKind, const std::vector<const TensorDesc*>&, const Attrs&);

// Per-family recorders (ops_<family>.cpp); inputs/outputs as Recorder::record takes them.
using RecordFn = Status (*)(Recorder&, OpKind, const std::vector<DeviceView>&, const std::vector<DeviceView>&,
                            const Attrs&);
Status record_elementwise(Recorder&, OpKind, const std::vector<DeviceView>&, const std::vector<DeviceView>&, const Attrs&);
Status record_data(Recorder&, OpKind, const std::vector<DeviceView>&, const std::vector<DeviceView>&, const Attrs&);
Status record_linalg(Recorder&, OpKind, const std::vector<DeviceView>&, const std::vector<DeviceView>&, const Attrs&);
Status record_attention(Recorder&, OpKind, const std::vector<DeviceView>&, const std::vector<DeviceView>&, const Attrs&);
// sdpa (ops_sdpa.cpp): in = q, k, v[, mask[, cache position]]; y its output.
Status record_sdpa(Recorder& rec, const std::vector<DeviceView>& in, const DeviceView& y, const Attrs& attrs);
// decode_block (ops_decode_block.cpp): in as ops.def lists them; y its output.
Status record_decode_block(Recorder& rec, const std::vector<DeviceView>& in, const DeviceView& y, const Attrs& attrs);
Status record_decode_layer(Recorder& rec, const std::vector<DeviceView>& in, const std::vector<DeviceView>& out, const Attrs& attrs);
Status record_norm(Recorder&, OpKind, const std::vector<DeviceView>&, const std::vector<DeviceView>&, const Attrs&);
// The reduce family (ops_reduce.cpp): reduce_sum/mean/max/min; softmax, log_softmax and
// argmax passed on to the norm family's code.
Status record_reduce(Recorder&, OpKind, const std::vector<DeviceView>&, const std::vector<DeviceView>&, const Attrs&);
Status record_conv(Recorder&, OpKind, const std::vector<DeviceView>&, const std::vector<DeviceView>&, const Attrs&);
Status record_rnn(Recorder&, OpKind, const std::vector<DeviceView>&, const std::vector<DeviceView>&, const Attrs&);
// Whether tdt_greedy's kernel takes these attributes: it stages [x | h] (2 pred_hidden) and the
// joint's input (joint_hidden) in 16 KiB of shared memory, and up to 8 durations in its push
// constants.
bool tdt_greedy_fits(const Attrs& attrs);
// Whether tdt_greedy runs its kernel on this device. Not on CPU implementations: lavapipe ends
// every shader's loops after 65535 iterations in all (Mesa's gallivm loop limiter), which a whole
// greedy decode in one dispatch outgrows (the kernel then reports status 3), and the CPU backend
// runs the loop on the same cores without the emulation. VRUN_TDT_KERNEL=1 runs the kernel there
// all the same (its tests, on short decodes).
bool tdt_kernel_wanted(const Context& ctx);
// Whether sdpa's kernels take this window [left, right] over Lq queries and Lk keys (Lq, Lk 0:
// not yet known): they compute band limits and mask columns in 32-bit integers.
bool sdpa_window_fits(const std::vector<int64_t>& window, int64_t Lq = 0, int64_t Lk = 0);

// Elementwise building block shared by copies, concat, slice_update and glu: y = f(a[, b[, c]])
// where a, b, c are already broadcast to y's shape (0 strides) and y may be strided.
Status record_eltwise(Recorder& rec, int opcode, const DeviceView& y, const DeviceView* a, const DeviceView* b,
                      const DeviceView* c, float p0 = 0, float p1 = 0);
// A copy of src into y shifted along one axis by an index held on the device (slice_update's
// offset): y's window at index i starts `stride` elements per unit of i after y's own offset,
// with i clamped to [0, max_index] (a GPU cannot fail a call part way). index_axis >= 0: index
// holds one entry per row of src along that axis (a scatter of rows: give y a 0 stride there).
Status record_copy_at(Recorder& rec, const DeviceView& y, const DeviceView& src, const DeviceView& index,
                      int64_t stride, int64_t max_index, int index_axis = -1);
// slice_update rotating what it writes: src (any float dtype) goes into the dense state at
// start (+ *offset, read on the device and clamped into the state) along axis, each row rotated
// at the position it lands on; rows of dim 1 from `heads` on pass through (heads 0: all rotate).
Status record_rope_into(Recorder& rec, const DeviceView& state, const DeviceView& src, const DeviceView& inv_freq,
                        const DeviceView* offset, int axis, int64_t start, bool interleaved, int64_t heads);

// 32-bit words of a kernel's push constants, in declaration order.
struct PushWords {
  uint32_t w[32] = {};
  uint32_t n = 0;
  PushWords& u(uint64_t v) {
    w[n++] = static_cast<uint32_t>(v);
    return *this;
  }
  PushWords& f(float v) {
    uint32_t b;
    static_assert(sizeof b == sizeof v);
    __builtin_memcpy(&b, &v, 4);
    w[n++] = b;
    return *this;
  }
  uint32_t bytes() const { return n * 4; }
};

// The tensor-core variant of kernel `base` this device runs ("<base>_khr" or "<base>_nv", as
// the context chose the extension), or "" when it has none or the binary lacks that variant.
std::string coopmat_kernel(const Context& ctx, const std::string& base);

// DType code as the kernels' specialisation constants take it; 255 = absent.
inline int32_t dt_code(DType t) { return static_cast<int32_t>(t); }
inline int32_t dt_code(const DeviceView& v) { return v.present() ? static_cast<int32_t>(v.dtype) : 255; }

}  // namespace vrun::vulkan
