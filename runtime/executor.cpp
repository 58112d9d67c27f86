#include "runtime/executor.h"

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <new>
#include <map>
#include <optional>
#include <set>

#include "kernels/ops/shape_infer.h"
#include "kernels/ops/views.h"
#include "runtime/base/host_memory.h"
#include "runtime/base/knobs.h"
#include "runtime/base/mapped_file.h"
#include "runtime/base/strings.h"

namespace vrun {

const char* backend_kind_name(BackendKind k) {
  switch (k) {
    case BackendKind::kCpu: return "cpu";
    case BackendKind::kVulkan: return "vulkan";
    case BackendKind::kAuto: return "auto";
  }
  return "?";
}

Result<BackendKind> parse_backend_kind(const std::string& s) {
  if (s == "cpu") return BackendKind::kCpu;
  if (s == "vulkan") return BackendKind::kVulkan;
  if (s == "auto") return BackendKind::kAuto;
  return err(ErrorCode::kInvalidArgument, "unknown backend '", s, "' (expected cpu, vulkan or auto)");
}

bool runs_on_gpu(BackendKind kind, int device) {
  if (kind == BackendKind::kCpu) return false;
  if (kind == BackendKind::kVulkan) return find_backend("vulkan") != nullptr;
  for (const BackendEntry& e : registered_backends())
    if (!e.host && e.is_gpu && e.is_gpu(device)) return true;
  return false;
}

namespace {

void free_aligned(uint8_t* p) { std::free(p); }

uint8_t* alloc_aligned(size_t bytes) {
  const size_t n = (bytes + 63) / 64 * 64;
  return static_cast<uint8_t*>(std::aligned_alloc(64, n ? n : 64));
}


}  // namespace

// A scratch arena, allocated by the first call of a method that uses it; shared by the methods a
// program names together (kSharedArenasMeta), sized to the largest.
struct ScratchArena {
  std::unique_ptr<uint8_t, void (*)(uint8_t*)> data{nullptr, free_aligned};
  int64_t bytes = 0;
};

struct Executor::MethodPlan {
  const MethodDef* method = nullptr;
  std::shared_ptr<ScratchArena> arena = std::make_shared<ScratchArena>();
  std::vector<TensorView> values;          // current views, rebuilt each run
  std::vector<Backend*> placement;         // per node: where it runs (null for view ops)
  std::vector<Attrs> static_attrs;         // per node, resolved when not symbolic
  std::vector<std::vector<TensorView>> scratch_in, scratch_out;
  // Per-node scratch reused by every call (a decode step runs hundreds of nodes).
  std::vector<TensorDesc> descs, out_desc;
  std::vector<const TensorDesc*> desc_ptrs;
  std::vector<int> in_roots, out_roots;
  std::vector<int> root;                         // storage root of each value
  std::vector<ValueStorage> storage;       // host storage of each root (device runs)
  std::vector<std::vector<uint8_t>> dense_inputs;  // dense copies of strided inputs (GPU runs)
  // GPU runs: the outputs' views and their roots' storage after a walk with these symbol values
  // (they depend on nothing else when every output lives in the arena or a state), so a call
  // whose recording is replayed can skip the walk.
  struct WalkOutputs {
    std::vector<TensorView> views;
    std::vector<ValueStorage> storage;
  };
  std::map<std::vector<int64_t>, WalkOutputs> walk_outputs;
  // VRUN_CALL_STATS=1: calls and wall time of this method, printed when the executor goes.
  uint64_t calls = 0;
  double seconds = 0, max_seconds = 0;
  // VRUN_OP_STATS=1: wall time of each node's CPU kernel, summed over calls, and the input
  // shapes of its last call; printed by op and by op and input shapes when the executor goes.
  std::vector<double> node_seconds;
  std::vector<std::string> node_shapes;
};

Executor::~Executor() {
  for (const auto& p : plans_) print_op_stats(*p);
  if (!knob_on(Knob::VRUN_CALL_STATS)) return;
  for (const auto& p : plans_)
    if (p->calls > 0)
      std::fprintf(stderr, "call stats: method %-16s %8llu calls, %10.3f ms, %8.1f us each, longest %8.1f us\n",
                   p->method->name.c_str(), static_cast<unsigned long long>(p->calls), p->seconds * 1e3,
                   p->seconds * 1e6 / static_cast<double>(p->calls), p->max_seconds * 1e6);
}

void Executor::print_op_stats(const MethodPlan& p) const {
  if (p.node_seconds.empty()) return;
  double total = 0;
  std::vector<double> by_op(kNumOps, 0.0);
  for (size_t i = 0; i < p.node_seconds.size(); ++i) {
    total += p.node_seconds[i];
    by_op[static_cast<size_t>(p.method->nodes[i].op)] += p.node_seconds[i];
  }
  if (total <= 0) return;
  std::fprintf(stderr, "op stats: method %s, %.3f s in CPU kernels\n", p.method->name.c_str(), total);
  std::vector<int> ops;
  for (int o = 0; o < kNumOps; ++o)
    if (by_op[o] > 0) ops.push_back(o);
  std::sort(ops.begin(), ops.end(), [&](int a, int b) { return by_op[a] > by_op[b]; });
  for (int o : ops)
    std::fprintf(stderr, "  %-16s %10.3f ms %5.1f%%\n", op_name(static_cast<OpKind>(o)), by_op[o] * 1e3, 100 * by_op[o] / total);
  // Nodes of the same op and input shapes (one per layer) summed.
  std::map<std::string, std::pair<double, int>> by_shape;
  for (size_t i = 0; i < p.node_seconds.size(); ++i) {
    if (p.node_seconds[i] <= 0) continue;
    auto& e = by_shape[std::string(op_name(p.method->nodes[i].op)) + " " + p.node_shapes[i]];
    e.first += p.node_seconds[i];
    ++e.second;
  }
  std::vector<std::pair<double, std::string>> rows;
  for (const auto& [key, e] : by_shape) rows.emplace_back(e.first, std::to_string(e.second) + " x " + key);
  std::sort(rows.rbegin(), rows.rend());
  std::fprintf(stderr, "  by op and input shapes:\n");
  for (size_t k = 0; k < rows.size() && k < 24; ++k)
    std::fprintf(stderr, "  %10.3f ms  %s\n", rows[k].first * 1e3, rows[k].second.c_str());
}

Result<std::unique_ptr<Executor>> Executor::create(std::shared_ptr<const Program> program,
                                                   const ExecutorOptions& options) {
  if (!program) return err(ErrorCode::kInvalidArgument, "no program");
  std::unique_ptr<Executor> ex(new Executor());
  ex->program_ = std::move(program);
  ex->pool_ = std::make_unique<ThreadPool>(options.threads);
  VRUN_RETURN_IF_ERROR(ex->start_backends(options));
  const Program& p = *ex->program_;
  for (const StateDef& s : p.states) {
    const int64_t bytes = dtype_bytes(s.dtype, s.shape.numel());
    ZeroedMemory mem(static_cast<size_t>(bytes));
    if (!mem.data()) return err(ErrorCode::kOutOfMemory, "state '", s.name, "' needs ", human_bytes(bytes), " which could not be allocated");
    ex->states_.push_back(TensorView::dense(mem.data(), s.dtype, s.shape));
    ex->state_storage_.push_back(std::move(mem));
  }
  for (const MethodDef& m : p.methods) {
    auto plan = std::make_unique<MethodPlan>();
    plan->method = &m;
    plan->values.resize(m.values.size());
    plan->storage.resize(m.values.size());
    plan->dense_inputs.resize(m.inputs.size());
    if (knob_on(Knob::VRUN_OP_STATS)) {
      plan->node_seconds.assign(m.nodes.size(), 0.0);
      plan->node_shapes.resize(m.nodes.size());
    }
    for (size_t v = 0; v < m.values.size(); ++v)
      plan->root.push_back(m.storage_root(static_cast<int>(v)));
    for (size_t k = 0; k < m.nodes.size(); ++k) {
      const NodeDef& n = m.nodes[k];
      Backend* where = nullptr;
      if (!op_schema(n.op).is_view()) {
        // No node is ever left without a place: the host backend runs what no device takes.
        if (!ex->host_->supports(m, k))
          return err(ErrorCode::kUnsupported, "method '", m.name, "': no ", ex->host_->kind(), " kernel for op ", op_name(n.op));
        for (const auto& d : ex->devices_)
          if (!where && d->supports(m, k)) where = d.get();
        if (!where) where = ex->host_.get();
      }
      plan->placement.push_back(where);
      plan->static_attrs.push_back(n.attrs.symbolic() ? n.attrs.values : n.attrs.resolve({}));
      plan->scratch_in.emplace_back(n.inputs.size());
      plan->scratch_out.emplace_back(n.outputs.size());
    }
    plan->arena->bytes = m.arena_size;
    ex->plans_.push_back(std::move(plan));
  }
  VRUN_RETURN_IF_ERROR(ex->share_arenas());
  VRUN_RETURN_IF_ERROR(ex->copy_pieced_constants());
  return ex;
}

// The program's kSharedArenasMeta groups: one arena each, as large as the largest member's.
Status Executor::share_arenas() {
  const MetaValue* groups = program_->meta(kSharedArenasMeta);
  if (!groups) return Status::ok();
  if (groups->type != MetaType::kStrings)
    return err(ErrorCode::kInvalidProgram, program_->source, ": metadata ", kSharedArenasMeta, " is not a string list");
  std::set<std::string> grouped;
  for (const std::string& group : groups->strings) {
    auto shared = std::make_shared<ScratchArena>();
    std::vector<MethodPlan*> members;
    for (const std::string& name : split(group, ',')) {
      auto it = std::find_if(plans_.begin(), plans_.end(), [&](const auto& pl) { return pl->method->name == name; });
      if (it == plans_.end())
        return err(ErrorCode::kInvalidProgram, program_->source, ": metadata ", kSharedArenasMeta, " names method '", name,
                   "', which the program lacks");
      if (!grouped.insert(name).second)
        return err(ErrorCode::kInvalidProgram, program_->source, ": method '", name, "' is named twice in ", kSharedArenasMeta);
      shared->bytes = std::max(shared->bytes, (*it)->arena->bytes);
      members.push_back(it->get());
    }
    for (MethodPlan* pl : members) pl->arena = shared;
  }
  return Status::ok();
}

Status Executor::start_backends(const ExecutorOptions& options) {
  const auto& all = registered_backends();
  if (all.empty() || !all.front().host) return err(ErrorCode::kInternal, "no host backend is linked into this program");
  BackendOptions bo;
  if (const char* e = knob_value(Knob::VRUN_CPU_OPS); e && *e) {
    // Ops that run on the host backend even where a device has a kernel: the fallback path on
    // demand, to check it or to work around a device's kernel.
    bo.host_only_ops.assign(kNumOps, false);
    for (const std::string& name : split_nonempty(e, ',')) {
      bool known = false;
      for (int o = 0; o < kNumOps; ++o)
        if (name == op_name(static_cast<OpKind>(o))) known = bo.host_only_ops[static_cast<size_t>(o)] = true;
      if (!known) return err(ErrorCode::kInvalidArgument, "VRUN_CPU_OPS: '", name, "' is not an op (vrun info --nodes lists a program's ops)");
    }
  }
  bo.device = options.device;
  bo.validation = options.validation;
  bo.pool = pool_.get();
  VRUN_ASSIGN_OR_RETURN(host_, all.front().make(program_.get(), bo));
  if (options.backend == BackendKind::kCpu) {
    gpu_why_not_ = "--backend cpu";
    return Status::ok();
  }
  const std::string wanted = options.backend == BackendKind::kVulkan ? "vulkan" : "";
  bo.require_gpu = options.backend == BackendKind::kAuto;
  for (size_t k = 1; k < all.size(); ++k) {
    if (!wanted.empty() && all[k].kind != wanted) continue;
    auto b = all[k].make(program_.get(), bo);
    if (b.is_ok()) {
      devices_.push_back(std::move(*b));
      return Status::ok();
    }
    gpu_why_not_ += (gpu_why_not_.empty() ? "" : "; ") + b.status().message();
  }
  if (!wanted.empty() && !find_backend(wanted)) gpu_why_not_ = "this vrun was built without the " + wanted + " backend";
  if (gpu_why_not_.empty()) gpu_why_not_ = "no device backend was built";
  if (!wanted.empty()) return err(ErrorCode::kUnsupported, "--backend ", wanted, ": ", gpu_why_not_);
  return Status::ok();
}

Status Executor::copy_pieced_constants() {
  const Program& p = *program_;
  std::vector<bool> host_reads(p.constants.size(), false);
  for (const MethodDef& m : p.methods) {
    auto mark = [&](int id) {
      if (id < 0) return;
      const ValueDef& root = m.values[m.storage_root(id)];
      if (root.kind == ValueKind::kConstant) host_reads[root.index] = true;
    };
    const MethodPlan& plan = *plans_[static_cast<size_t>(&m - p.methods.data())];
    for (size_t n = 0; n < m.nodes.size(); ++n) {
      if (plan.placement[n] != host_.get()) continue;
      for (int id : m.nodes[n].inputs) mark(id);
    }
    for (int id : m.outputs) mark(id);
  }
  // A copy per pieced constant read here; the pieces' pages of a mapped file then leave resident
  // memory, so a stacked or re-aligned weight is resident once.
  const_host_.assign(p.constants.size(), nullptr);
  for (size_t i = 0; i < p.constants.size(); ++i) {
    const ConstantDef& c = p.constants[i];
    const_host_[i] = c.data;
    if (c.data || c.size == 0) continue;
    ZeroedMemory mem(static_cast<size_t>(c.size), host_reads[i]);
    if (!mem.data()) return err(ErrorCode::kOutOfMemory, "constant '", c.name, "': ", human_bytes(c.size), " could not be allocated");
    if (host_reads[i]) {
      c.copy_to(mem.data());
      c.for_each_run([](const uint8_t* run, uint64_t n) { MappedFile::release_pages(run, static_cast<size_t>(n)); });
    }
    const_host_[i] = mem.data();
    const_storage_.push_back(std::move(mem));
  }
  return Status::ok();
}

void Executor::reset_state() {
  for (ZeroedMemory& m : state_storage_) m.zero();
  for (const auto& d : devices_) d->states_reset();
}

TensorView Executor::state(const std::string& name) const {
  for (size_t i = 0; i < program_->states.size(); ++i)
    if (program_->states[i].name == name) return states_[i];
  return {};
}

std::vector<std::string> Executor::node_backends(const std::string& method) const {
  for (const auto& p : plans_) {
    if (p->method->name != method) continue;
    std::vector<std::string> b;
    for (const Backend* where : p->placement) b.push_back(where ? where->kind() : host_->kind());
    return b;
  }
  return {};
}

uint64_t Executor::gpu_validation_errors() const {
  uint64_t n = 0;
  for (const auto& d : devices_) n += d->validation_errors();
  return n;
}
uint64_t Executor::gpu_replayed_calls() const {
  uint64_t n = 0;
  for (const auto& d : devices_) n += d->replayed_calls();
  return n;
}

uint64_t Executor::max_tensor_bytes() const {
  uint64_t most = 0;
  for (const auto& d : devices_)
    if (const uint64_t m = d->max_tensor_bytes(); m > 0) most = most == 0 ? m : std::min(most, m);
  return most;
}

Executor::ArenaInfo Executor::arena(const std::string& method) const {
  for (const auto& p : plans_)
    if (p->method->name == method) return {p->arena->bytes, p->arena->data != nullptr};
  return {};
}

uint64_t Executor::free_memory_bytes() const {
  if (!devices_.empty()) {
    uint64_t least = 0;
    for (const auto& d : devices_)
      if (const uint64_t f = d->free_memory_bytes(); f > 0) least = least == 0 ? f : std::min(least, f);
    return least;
  }
  return available_host_memory();
}

std::string Executor::device_description() const {
  if (devices_.empty()) return std::string(host_->kind()) + " (no GPU: " + gpu_why_not_ + ")";
  return std::string(devices_.front()->kind()) + ": " + devices_.front()->device_name();
}

Result<std::vector<TensorView>> Executor::run(const std::string& name, const std::vector<TensorView>& inputs,
                                              const std::map<std::string, int64_t>& given, uint64_t fetch) {
  MethodPlan* plan = nullptr;
  for (auto& p : plans_)
    if (p->method->name == name) plan = p.get();
  if (plan) {
    const auto t0 = std::chrono::steady_clock::now();
    auto r = run_plan(*plan, inputs, given, fetch);
    const double s = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
    plan->calls++;
    plan->seconds += s;
    plan->max_seconds = std::max(plan->max_seconds, s);
    return r;
  }
  std::string known;
  for (const auto& m : program_->methods) known += (known.empty() ? "" : ", ") + m.name;
  return err(ErrorCode::kNotFound, "method '", name, "' not in program (it has: ", known, ")");
}

Result<std::vector<TensorView>> Executor::run_plan(MethodPlan& plan, const std::vector<TensorView>& inputs,
                                                   const std::map<std::string, int64_t>& given, uint64_t fetch) {
  const MethodDef& m = *plan.method;
  const std::string mw = "method '" + m.name + "'";
  if (inputs.size() != m.inputs.size())
    return err(ErrorCode::kInvalidArgument, mw, " takes ", m.inputs.size(), " inputs, got ", inputs.size());

  // Bind symbols: given values first, then the inputs' shapes.
  std::vector<int64_t> sym(m.symbols.size(), 0);
  std::vector<bool> bound(m.symbols.size(), false);
  for (const auto& [k, v] : given) {
    const int s = m.symbol_index(k);
    if (s < 0) return err(ErrorCode::kInvalidArgument, mw, " has no symbol '", k, "'");
    sym[s] = v;
    bound[s] = true;
  }
  for (size_t i = 0; i < inputs.size(); ++i) {
    const ValueDef& def = m.values[m.inputs[i]];
    const TensorView& t = inputs[i];
    const std::string w = mw + " input " + std::to_string(i) + " '" + def.name + "'";
    if (!t.present() && t.numel() != 0) return err(ErrorCode::kInvalidArgument, w, ": no data");
    if (t.dtype != def.dtype) return err(ErrorCode::kInvalidArgument, w, ": dtype ", dtype_name(t.dtype), ", expected ", dtype_name(def.dtype));
    if (t.rank() != static_cast<int>(def.dims.size()))
      return err(ErrorCode::kInvalidArgument, w, ": rank ", t.rank(), ", expected ", def.dims.size());
    for (int d = 0; d < t.rank(); ++d) {
      const DimDef& dd = def.dims[d];
      if (dd.is_static()) {
        if (t.shape[d] != dd.size)
          return err(ErrorCode::kInvalidArgument, w, ": dim ", d, " is ", t.shape[d], ", expected ", dd.size);
        continue;
      }
      const int s = dd.expr->terms[0].first;
      if (bound[s] && sym[s] != t.shape[d])
        return err(ErrorCode::kInvalidArgument, w, ": dim ", d, " is ", t.shape[d], " but symbol ", m.symbols[s].name,
                   " is already ", sym[s]);
      sym[s] = t.shape[d];
      bound[s] = true;
    }
  }
  for (size_t s = 0; s < m.symbols.size(); ++s) {
    if (!bound[s]) return err(ErrorCode::kInvalidArgument, mw, ": symbol ", m.symbols[s].name, " is not bound (pass its value)");
    if (sym[s] < m.symbols[s].min || sym[s] > m.symbols[s].max)
      return err(ErrorCode::kInvalidArgument, mw, ": ", m.symbols[s].name, " = ", sym[s], " is outside [",
                 m.symbols[s].min, ", ", m.symbols[s].max, "]");
  }

  ScratchArena& arena = *plan.arena;
  if (!arena.data && arena.bytes > 0) {
    if (const int64_t cap = arena_ceiling_bytes(); cap >= 0 && arena.bytes > cap)
      return err(ErrorCode::kOutOfMemory, mw, ": scratch arena of ", human_bytes(arena.bytes), " is over VRUN_MAX_ARENA_MB");
    arena.data.reset(alloc_aligned(static_cast<size_t>(arena.bytes)));
    if (!arena.data) return err(ErrorCode::kOutOfMemory, mw, ": scratch arena of ", human_bytes(arena.bytes), " could not be allocated");
  }
  for (size_t v = 0; v < m.values.size(); ++v) {
    const ValueDef& def = m.values[v];
    if (def.kind == ValueKind::kConstant) {
      const ConstantDef& c = program_->constants[def.index];
      plan.values[v] = TensorView::dense(const_cast<uint8_t*>(const_host_[def.index]), c.dtype, c.shape);
    } else if (def.kind == ValueKind::kState) {
      plan.values[v] = states_[def.index];
    } else {
      plan.values[v] = TensorView{};
    }
  }
  for (size_t i = 0; i < inputs.size(); ++i) plan.values[m.inputs[i]] = inputs[i];
  if (!devices_.empty()) {
    // The device holds dense copies: strided inputs are made dense here first.
    for (size_t i = 0; i < inputs.size(); ++i) {
      TensorView& v = plan.values[m.inputs[i]];
      if (v.is_contiguous() || is_quantized(v.dtype)) continue;
      plan.dense_inputs[i].resize(static_cast<size_t>(v.dense_bytes()));
      TensorView d = TensorView::dense(plan.dense_inputs[i].data(), v.dtype, v.shape);
      Attrs none(OpKind::copy);
      NodeCall call;
      call.op = OpKind::copy;
      call.in = std::span<const TensorView>(&v, 1);
      call.out = std::span<TensorView>(&d, 1);
      call.attrs = &none;
      VRUN_RETURN_IF_ERROR(host_->run(call).with_context(mw + " input " + std::to_string(i)));
      v = d;
    }
    for (size_t v = 0; v < m.values.size(); ++v) {
      const ValueDef& def = m.values[v];
      if (def.kind == ValueKind::kIntermediate) continue;
      plan.storage[v] = {static_cast<uint8_t*>(plan.values[v].data), plan.values[v].dense_bytes()};
    }
    for (const auto& d : devices_) VRUN_RETURN_IF_ERROR(d->begin(m, arena.data.get(), arena.bytes, sym, fetch));
  }
  // A call one device backend replays from a recording (the only device in the call).
  const bool skippable = devices_.size() == 1 && devices_.front()->walk_skippable();
  const auto known = skippable ? plan.walk_outputs.find(sym) : plan.walk_outputs.end();
  if (known != plan.walk_outputs.end()) {
    // A replayed call: the recording does the work, the walk would only repeat what it did.
    VRUN_RETURN_IF_ERROR(devices_.front()->replay_walk(m, plan.storage).with_context(mw));
    for (size_t i = 0; i < m.outputs.size(); ++i) {
      plan.values[m.outputs[i]] = known->second.views[i];
      plan.storage[plan.root[m.outputs[i]]] = known->second.storage[i];
    }
  } else {
    for (size_t n = 0; n < m.nodes.size(); ++n) {
      const Status s = run_node(plan, n, sym);
      if (!s.is_ok()) {
        const NodeDef& node = m.nodes[n];
        return s.with_context(mw + " node " + std::to_string(n) + " (" + op_name(node.op) +
                              (node.name.empty() ? "" : " " + node.name) + ")");
      }
    }
    if (!devices_.empty()) {
      bool cacheable = true;
      MethodPlan::WalkOutputs w;
      for (int id : m.outputs) {
        const ValueKind k = m.values[plan.root[id]].kind;
        cacheable = cacheable && (k == ValueKind::kIntermediate || k == ValueKind::kState);
        w.views.push_back(plan.values[id]);
        w.storage.push_back(plan.storage[plan.root[id]]);
      }
      if (plan.walk_outputs.size() >= 64) plan.walk_outputs.clear();
      if (cacheable) plan.walk_outputs[sym] = std::move(w);
    }
  }
  auto fetched = [&](size_t i) { return i >= 64 || ((fetch >> i) & 1u) != 0; };
  if (!devices_.empty()) {
    std::vector<int> roots;
    for (size_t i = 0; i < m.outputs.size(); ++i)
      if (fetched(i)) roots.push_back(plan.root[m.outputs[i]]);
    for (const auto& d : devices_) VRUN_RETURN_IF_ERROR(d->finish(m, roots, plan.storage).with_context(mw));
  }
  std::vector<TensorView> outs;
  for (size_t i = 0; i < m.outputs.size(); ++i) outs.push_back(fetched(i) ? plan.values[m.outputs[i]] : TensorView{});
  return outs;
}

Status Executor::run_node(MethodPlan& plan, size_t index, const std::vector<int64_t>& sym) {
  const MethodDef& m = *plan.method;
  const NodeDef& node = m.nodes[index];
  const OpSchema& sch = op_schema(node.op);
  // Only symbolic attributes are resolved per call; the rest were resolved once in create().
  std::optional<Attrs> resolved;
  if (node.attrs.symbolic()) resolved = node.attrs.resolve(sym);
  const Attrs& attrs = resolved ? *resolved : plan.static_attrs[index];
  auto& in = plan.scratch_in[index];
  auto& out = plan.scratch_out[index];
  for (size_t k = 0; k < node.inputs.size(); ++k) {
    in[k] = node.inputs[k] >= 0 ? plan.values[node.inputs[k]] : TensorView{};
    const InputSpec& spec = sch.inputs[std::min(k, sch.inputs.size() - 1)];
    if (spec.contiguous && in[k].present() && !in[k].is_contiguous())
      return err(ErrorCode::kInternal, "input '", spec.name, "' must be contiguous");
  }
  if (sch.is_view()) {
    std::vector<TensorView> views;
    VRUN_RETURN_IF_ERROR(compute_view(node.op, in[0], attrs, &views));
    if (views.size() != node.outputs.size()) return err(ErrorCode::kInternal, "view produced ", views.size(), " outputs");
    for (size_t o = 0; o < views.size(); ++o) plan.values[node.outputs[o]] = views[o];
    return Status::ok();
  }
  std::vector<TensorDesc>& descs = plan.descs;
  std::vector<const TensorDesc*>& ptrs = plan.desc_ptrs;
  descs.resize(in.size());
  ptrs.assign(in.size(), nullptr);
  for (size_t k = 0; k < in.size(); ++k)
    if (node.inputs[k] >= 0) {
      descs[k] = {in[k].dtype, in[k].shape};
      ptrs[k] = &descs[k];
    }
  std::vector<TensorDesc>& out_desc = plan.out_desc;
  out_desc.clear();
  VRUN_RETURN_IF_ERROR(infer_shapes(node.op, ptrs, attrs, &out_desc));
  if (out_desc.size() != node.outputs.size()) return err(ErrorCode::kInternal, "shape inference gave ", out_desc.size(), " outputs");
  for (size_t o = 0; o < out_desc.size(); ++o) {
    const ValueDef& def = m.values[node.outputs[o]];
    if (o == 0 && op_schema(node.op).writes_input0()) {
      out[o] = in[0];
    } else {
      const int64_t bytes = dtype_bytes(out_desc[o].dtype, out_desc[o].shape.numel());
      if (out_desc[o].dtype != def.dtype)
        return err(ErrorCode::kInvalidProgram, "output dtype ", dtype_name(out_desc[o].dtype), " differs from the program's ", dtype_name(def.dtype));
      if (bytes > def.arena_size)
        return err(ErrorCode::kInvalidArgument, "output ", out_desc[o].shape.str(), " needs ", bytes,
                   " bytes but the program planned ", def.arena_size, " (symbol outside its bound?)");
      out[o] = TensorView::dense(plan.arena->data.get() + def.arena_offset, out_desc[o].dtype, out_desc[o].shape);
    }
    plan.values[node.outputs[o]] = out[o];
  }
  std::vector<int>& in_roots = plan.in_roots;
  std::vector<int>& out_roots = plan.out_roots;
  in_roots.clear();
  out_roots.clear();
  Backend* where = plan.placement[index];
  NodeCall call;
  call.method = &m;
  call.node = index;
  call.op = node.op;
  call.in = in;
  call.out = out;
  call.attrs = &attrs;
  if (!devices_.empty()) {
    for (size_t k = 0; k < in.size(); ++k) in_roots.push_back(node.inputs[k] >= 0 ? plan.root[node.inputs[k]] : -1);
    for (size_t o = 0; o < out.size(); ++o) {
      const int r = plan.root[node.outputs[o]];
      out_roots.push_back(r);
      if (o != 0 || !op_schema(node.op).writes_input0()) plan.storage[r] = {static_cast<uint8_t*>(out[o].data), out[o].dense_bytes()};
    }
    call.in_roots = in_roots;
    call.out_roots = out_roots;
    call.storage = plan.storage;
    // The node's inputs must be current in host memory wherever another device last wrote them
    // (slice_update and decode_layer write into the state in place: the rest of it must be current too).
    for (const auto& d : devices_) {
      if (d.get() == where) continue;
      VRUN_RETURN_IF_ERROR(d->sync_to_host(m, in_roots, plan.storage));
      if (op_schema(node.op).writes_input0()) VRUN_RETURN_IF_ERROR(d->sync_to_host(m, out_roots, plan.storage));
    }
    if (where != host_.get()) return where->run(call);
  }
  if (!plan.node_seconds.empty()) {
    const auto t0 = std::chrono::steady_clock::now();
    VRUN_RETURN_IF_ERROR(host_->run(call));
    plan.node_seconds[index] += std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
    std::string& d = plan.node_shapes[index];
    d.clear();
    for (const TensorView& v : in) {
      if (!d.empty()) d += ' ';
      d += v.present() ? std::string(dtype_name(v.dtype)) + v.shape.str() : "-";
    }
  } else {
    VRUN_RETURN_IF_ERROR(host_->run(call));
  }
  for (const auto& d : devices_) d->host_written(m, out_roots);
  return Status::ok();
}

}  // namespace vrun
