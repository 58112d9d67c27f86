#include "runtime/backend.h"

#include <mutex>

namespace vrun {

namespace {

std::vector<BackendEntry>& entries() {
  static std::vector<BackendEntry> e;
  return e;
}

}  // namespace

void register_backend(BackendEntry entry) {
  auto& e = entries();
  for (const auto& b : e)
    if (b.kind == entry.kind) return;
  // The host backend first: the executor's fallback for every node.
  if (entry.host) e.insert(e.begin(), std::move(entry));
  else e.push_back(std::move(entry));
}

const std::vector<BackendEntry>& registered_backends() { return entries(); }

const BackendEntry* find_backend(const std::string& kind) {
  for (const auto& b : entries())
    if (b.kind == kind) return &b;
  return nullptr;
}

Status run_host_op(OpKind op, std::span<const TensorView> in, std::span<TensorView> out, const Attrs& attrs, ThreadPool* pool) {
  const auto& e = entries();
  if (e.empty() || !e.front().host) return err(ErrorCode::kUnsupported, "no host backend is linked into this program");
  // One host backend for every such call; its kernels keep no state between calls.
  static std::once_flag once;
  static std::unique_ptr<Backend> host;
  static Status made = Status::ok();
  std::call_once(once, [&] {
    BackendOptions o;
    auto b = e.front().make(nullptr, o);
    if (b.is_ok()) host = std::move(*b);
    else made = b.status();
  });
  VRUN_RETURN_IF_ERROR(made);
  NodeCall call;
  call.op = op;
  call.in = in;
  call.out = out;
  call.attrs = &attrs;
  call.pool = pool;
  return host->run(call);
}

}  // namespace vrun
