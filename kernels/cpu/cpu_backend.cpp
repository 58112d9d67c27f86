// The host backend: the CPU kernels of kernels/cpu, one for every op, computing on the
// executor's host copies in place. It registers itself as the host backend.
#include <cstdio>

#include "kernels/cpu/blas_core.h"
#include "kernels/cpu/cpu_kernel.h"
#include "runtime/backend.h"

namespace vrun {
namespace {

class CpuBackend final : public Backend {
 public:
  explicit CpuBackend(ThreadPool* pool) : pool_(pool) {}
  const char* kind() const override { return "cpu"; }
  std::string device_name() const override { return "cpu"; }
  bool supports(const MethodDef& m, size_t n) const override { return cpu_kernels().get(m.nodes[n].op) != nullptr; }

  Status run(const NodeCall& c) override {
    const CpuKernelFn fn = cpu_kernels().get(c.op);
    if (!fn) return err(ErrorCode::kUnsupported, "no CPU kernel for op ", op_name(c.op));
    KernelCall call;
    call.op = c.op;
    call.in = c.in.data();
    call.n_in = static_cast<int>(c.in.size());
    call.out = c.out.data();
    call.n_out = static_cast<int>(c.out.size());
    call.attrs = c.attrs;
    call.pool = c.pool ? c.pool : pool_;
    return fn(call);
  }

 private:
  ThreadPool* pool_;
};

// The BLAS for large products: OpenBLAS's kernel set, and the one it picked at load where that
// was older than the CPU (blas_core.cpp).
std::vector<std::string> describe_cpu() {
  const BlasCore core = blas_core();
  if (core.now.empty()) return {"cpu blas: none (vrun's own products)"};
  std::string line = "cpu blas: OpenBLAS, " + core.now + " kernels";
  if (core.at_load != core.now)
    line += " (it picked " + core.at_load + " at load: a CPU newer than the library; OPENBLAS_CORETYPE overrides)";
  if (!blas_rows_independent())
    line += "; a row's sums depend on the rows beside it (batched sequences agree with alone to rounding)";
  return {line};
}

const bool registered = [] {
  register_backend({"cpu", /*host=*/true,
                    [](const Program*, const BackendOptions& o) -> Result<std::unique_ptr<Backend>> {
                      return std::unique_ptr<Backend>(std::make_unique<CpuBackend>(o.pool));
                    },
                    describe_cpu, /*device_count=*/nullptr, /*is_gpu=*/nullptr});
  return true;
}();

}  // namespace
}  // namespace vrun
