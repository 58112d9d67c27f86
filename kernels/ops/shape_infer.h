// Output shapes and dtypes of every op from its inputs' and its attributes. Used by the graph
// builder (at the symbols' upper bounds, for memory planning) and by the executor at run time
// (with the symbols bound), so kernels always receive outputs of the right shape.
#pragma once

#include <vector>

#include "kernels/ops/attrs.h"
#include "runtime/base/status.h"
#include "runtime/base/tensor.h"

namespace vrun {

// in[k] is nullptr for an absent optional input. Errors name the op, the input and the
// expected vs actual shape ("linear: x [2, 7] and weight [5, 8] disagree on K (7 vs 8)").
Status infer_shapes(OpKind op, const std::vector<const TensorDesc*>& in, const Attrs& attrs,
                    std::vector<TensorDesc>* out);

// A position held on the device (rope's and slice_update's offset, sdpa's pos):
// absent, or an i32 tensor of one element.
Status check_device_scalar(const TensorDesc* t, const char* op, const char* name);
// A device position input that holds one value, or one for each of `per` rows or batch entries
// (`what` names them in the error).
Status check_device_positions(const TensorDesc* t, const char* op, const char* name, int64_t per, const char* what);
// rope's mode (attribute mode_attr: half or interleaved) and frequencies (f32 [rotary_dim / 2]):
// rope's own, and slice_update's when it rotates what it writes.
Status check_rope_frequencies(const char* op, const char* mode_attr, const Attrs& attrs, const TensorDesc& inv_freq,
                              int64_t rotary_dim);

// Per-family shape functions (kernels/shapes/<family>.cpp); infer_shapes dispatches on family,
// `out` emptied first.
using ShapeFn = Status (*)(OpKind op, const std::vector<const TensorDesc*>& in, const Attrs& attrs,
                           std::vector<TensorDesc>* out);
Status infer_shapes_elementwise(OpKind, const std::vector<const TensorDesc*>&, const Attrs&, std::vector<TensorDesc>*);  // unary, binary
Status infer_shapes_reduce(OpKind, const std::vector<const TensorDesc*>&, const Attrs&, std::vector<TensorDesc>*);
Status infer_shapes_norm(OpKind, const std::vector<const TensorDesc*>&, const Attrs&, std::vector<TensorDesc>*);
Status infer_shapes_linalg(OpKind, const std::vector<const TensorDesc*>&, const Attrs&, std::vector<TensorDesc>*);  // linalg, attention
Status infer_shapes_conv(OpKind, const std::vector<const TensorDesc*>&, const Attrs&, std::vector<TensorDesc>*);
Status infer_shapes_data(OpKind, const std::vector<const TensorDesc*>&, const Attrs&, std::vector<TensorDesc>*);
Status infer_shapes_rnn(OpKind, const std::vector<const TensorDesc*>&, const Attrs&, std::vector<TensorDesc>*);
// view ops: via compute_view in kernels/views.h

}  // namespace vrun
