// Small helpers shared by the elementwise, reduce, norm and data CPU kernels: argument checks
// and error messages that name the op and the dtypes involved.
#pragma once

#include <string>
#include <type_traits>

#include "kernels/cpu/cpu_kernel.h"
#include "runtime/base/convert.h"

namespace vrun::cpu {

// "add (a f16, b f32 -> y f16)": the dtypes a call brought, for kUnsupported messages.
inline std::string describe_call(const KernelCall& c) {
  const OpSchema& s = op_schema(c.op);
  std::string d = s.name + " (";
  for (int k = 0; k < c.n_in; ++k) {
    const std::string& name = k < static_cast<int>(s.inputs.size()) ? s.inputs[k].name : s.inputs.back().name;
    d += (k ? ", " : "") + name + " " + (c.in[k].present() ? dtype_name(c.in[k].dtype) : "absent");
  }
  d += " ->";
  for (int k = 0; k < c.n_out; ++k) d += std::string(k ? ", " : " ") + dtype_name(c.out[k].dtype);
  return d + ")";
}

inline Status unsupported_dtypes(const KernelCall& c) {
  return err(ErrorCode::kUnsupported, "CPU kernel does not support the dtypes of ", describe_call(c));
}

// fn(tag) for an activation dtype t, as dispatch_activation calls it, and fn's Status if it
// returns one; unsupported_dtypes(c) for any other dtype.
template <typename Fn>
Status for_activation(const KernelCall& c, DType t, Fn&& fn) {
  Status st;
  const bool ok = dispatch_activation(t, [&](auto tag) {
    if constexpr (std::is_same_v<decltype(fn(tag)), Status>) st = fn(tag);
    else fn(tag);
  });
  return ok ? st : unsupported_dtypes(c);
}

// Checks the number of inputs/outputs the executor passed.
inline Status check_arity(const KernelCall& c, int min_in, int max_in, int n_out) {
  if (c.n_in < min_in || (max_in >= 0 && c.n_in > max_in) || c.n_out != n_out)
    return err(ErrorCode::kInvalidArgument, op_name(c.op), ": expected ", min_in, "..", max_in, " inputs and ", n_out,
               " outputs, got ", c.n_in, " and ", c.n_out);
  for (int k = 0; k < min_in; ++k)
    if (!c.in[k].present()) return err(ErrorCode::kInvalidArgument, op_name(c.op), ": input ", k, " is missing");
  return Status::ok();
}

// dst[...] = src[...] converted as the cast op converts (torch's rules), for two views of the same
// shape and any plain dtypes, either side strided; false for block-quantised dtypes.
bool convert_view(const TensorView& dst, const TensorView& src, ThreadPool* pool);

}  // namespace vrun::cpu
