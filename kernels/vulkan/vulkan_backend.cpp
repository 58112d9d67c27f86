// The Vulkan backend: device copies of constants, states and each method's arena, and the
// recording of the nodes placed here. Data moves between host and device only where a node on the
// other side reads it (per storage root, tracked as host-fresh / device-fresh), so a method that
// runs wholly on the GPU makes no host round trip until its outputs are read back. Calls that
// repeat are captured and replayed (see "replay of repeated calls" below). It registers itself as
// the backend "vulkan".
#include <algorithm>
#include <cstdint>
#include <cstring>
#include <map>
#include <memory>
#include <span>
#include <string>
#include <tuple>

#include "kernels/vulkan/context.h"
#include "kernels/vulkan/memory.h"
#include "kernels/vulkan/ops.h"
#include "kernels/vulkan/recorder.h"
#include "runtime/backend.h"
#include "runtime/base/mapped_file.h"

namespace vrun {

namespace {

// Where a value's current contents are: the host storage, the device copy, or both; kZero says
// the host copy is all zeros as reset_state left it (so the device copy is made by zeroing on the
// device, not by uploading a KV cache of zeros: 500 MB for Llama-1B's default context).
constexpr uint8_t kHost = 1, kDevice = 2, kZero = 4;

// What backend auto refuses: a CPU implementation (lavapipe), or a device of no known type.
bool is_cpu_implementation(const vulkan::DeviceInfo& d) { return d.type == "cpu" || d.type == "other"; }

class VulkanBackend final : public Backend {
 public:
  const char* kind() const override { return "vulkan"; }
  std::string device_name() const override { return ctx_->info().name + " (" + ctx_->info().type + ")"; }
  uint64_t max_tensor_bytes() const override { return ctx_->limits().maxStorageBufferRange; }
  uint64_t free_memory_bytes() const override {
    const vulkan::MemoryStats s = ctx_->allocator().stats();
    return s.heap_budget > s.heap_usage ? s.heap_budget - s.heap_usage : 0;
  }
  bool supports(const MethodDef& m, size_t n) const override {
    if (&m != flags_method_) {
      auto it = on_gpu_.find(&m);
      flags_method_ = &m;
      flags_ = it != on_gpu_.end() ? &it->second : nullptr;
    }
    return flags_ && (*flags_)[n];
  }

  Status init(const Program& p, const BackendOptions& o) {
    program_ = &p;
    vulkan::ContextOptions co;
    co.device_index = o.device;
    co.validation = o.validation;
    VRUN_ASSIGN_OR_RETURN(ctx_, vulkan::Context::create(co));
    if (o.require_gpu && is_cpu_implementation(ctx_->info()))
      return err(ErrorCode::kUnsupported, "the only Vulkan device is ", ctx_->info().name,
                 ", a CPU implementation (slower than the CPU backend)");
    if (!ctx_->kernels_usable()) return err(ErrorCode::kUnsupported, ctx_->info().name, " lacks 8/16-bit storage buffers");
    VRUN_ASSIGN_OR_RETURN(rec_, vulkan::Recorder::create(*ctx_));
    // Which nodes run here: decided once, from dtypes, max shapes and attributes.
    std::vector<bool> const_used(p.constants.size(), false);
    for (const MethodDef& m : p.methods) {
      std::vector<bool>& flags = on_gpu_[&m];
      flags.assign(m.nodes.size(), false);
      for (size_t n = 0; n < m.nodes.size(); ++n) {
        const NodeDef& node = m.nodes[n];
        if (op_schema(node.op).is_view()) continue;
        std::vector<TensorDesc> descs(node.inputs.size());
        std::vector<const TensorDesc*> ptrs(node.inputs.size(), nullptr);
        for (size_t k = 0; k < node.inputs.size(); ++k) {
          if (node.inputs[k] < 0) continue;
          descs[k] = {m.values[node.inputs[k]].dtype, m.values[node.inputs[k]].max_shape()};
          ptrs[k] = &descs[k];
        }
        flags[n] = !(o.host_only_ops.size() > static_cast<size_t>(node.op) && o.host_only_ops[static_cast<size_t>(node.op)]) &&
                   vulkan::supports(*ctx_, node.op, ptrs, node.attrs.values) && bindable(m, node);
        if (!flags[n]) continue;
        for (int id : node.inputs) {
          if (id < 0) continue;
          const ValueDef& root = m.values[m.storage_root(id)];
          if (root.kind == ValueKind::kConstant) const_used[root.index] = true;
        }
      }
    }
    // Constants the GPU reads go up once, straight from the (mapped) program, through a bounded
    // amount of staging: pieces of at most kStagingChunk, the recording submitted whenever
    // kLoadStagingBytes are staged, so the same few host blocks carry every batch (staging a whole
    // model at once took a new 64 MiB host block per 64 MiB of weights: 0.6 s of a Llama-1B f16
    // load on an H100, and as much host memory as the weights). One host block's worth (64 MiB) a
    // batch: the staging stays resident (pinned) for as long as the process runs, and larger
    // batches did not load faster. Once a batch is on the device, the pages it came from in a
    // mapped file leave resident memory (MappedFile::release_pages): a model on the GPU does not
    // stay resident on the host as well.
    constexpr uint64_t kLoadStagingBytes = 64ull << 20;
    constants_.resize(p.constants.size());
    uint64_t staged = 0;
    std::vector<std::pair<const uint8_t*, uint64_t>> batch;
    auto flush = [&]() -> Status {
      VRUN_RETURN_IF_ERROR(rec_->submit_and_wait());
      for (const auto& [run, n] : batch) MappedFile::release_pages(run, static_cast<size_t>(n));
      batch.clear();
      staged = 0;
      return Status::ok();
    };
    for (size_t c = 0; c < p.constants.size(); ++c) {
      if (!const_used[c] || p.constants[c].size == 0) continue;
      VRUN_ASSIGN_OR_RETURN(constants_[c], ctx_->allocator().allocate(p.constants[c].size, vulkan::MemoryKind::kDevice,
                                                                      "constant " + p.constants[c].name));
      Status uploaded = Status::ok();
      uint64_t at = 0;
      p.constants[c].for_each_run([&](const uint8_t* run, uint64_t bytes) {
        for (uint64_t done = 0; done < bytes && uploaded.is_ok();) {
          const uint64_t n = std::min(vulkan::kStagingChunk, bytes - done);
          if (staged + n > kLoadStagingBytes) uploaded = flush();
          if (uploaded.is_ok()) uploaded = rec_->record_upload(run + done, constants_[c].ref(), at + done, n);
          staged += n;
          done += n;
        }
        batch.emplace_back(run, bytes);
        at += bytes;
      });
      VRUN_RETURN_IF_ERROR(uploaded);
    }
    for (const StateDef& s : p.states) {
      const uint64_t bytes = std::max<uint64_t>(dtype_bytes(s.dtype, s.shape.numel()), 4);
      VRUN_ASSIGN_OR_RETURN(auto buf, ctx_->allocator().allocate(bytes, vulkan::MemoryKind::kDevice, "state " + s.name));
      states_.push_back(std::move(buf));
    }
    state_fresh_.assign(p.states.size(), kHost | kZero);  // the executor's host states start zeroed
    VRUN_RETURN_IF_ERROR(flush());
    // One free block of device memory for the scratch tensors kernels take during a call (a
    // Llama-1B prefill of 512 tokens fills most of one) is claimed now, not by the first call:
    // on an H100 a new block cost 5-12 ms of an 18-24 ms time to first token. The arenas are
    // still taken by the calls (Llama programs carry a scoring method that generation never
    // calls, Parakeet's three encoders a run picks one or two of).
    const uint64_t block = ctx_->allocator().block_size(vulkan::MemoryKind::kDevice);
    return ctx_->allocator().reserve(block, vulkan::MemoryKind::kDevice, "scratch tensors of calls");
  }

  // Whether each tensor of a fixed shape that the node reads or writes fits one storage binding
  // of this device: on CPU implementations a binding reaches 128 MiB, less than a large
  // vocabulary's embedding table; such a node runs on the CPU backend instead. (A shape that
  // depends on symbols is checked when a call records it.)
  bool bindable(const MethodDef& m, const NodeDef& node) const {
    const uint64_t reach = ctx_->limits().maxStorageBufferRange;
    auto fits = [&](int id) {
      if (id < 0) return true;
      const ValueDef& v = m.values[id];
      if (!std::all_of(v.dims.begin(), v.dims.end(), [](const DimDef& d) { return d.is_static(); })) return true;
      return static_cast<uint64_t>(dtype_bytes(v.dtype, v.max_shape().numel())) <= reach;
    };
    return std::all_of(node.inputs.begin(), node.inputs.end(), fits) &&
           std::all_of(node.outputs.begin(), node.outputs.end(), fits);
  }

  Status begin(const MethodDef& m, uint8_t* host_arena, int64_t arena_bytes, std::span<const int64_t> sym,
               uint64_t fetch) override {
    MethodState& ms = methods_[&m];
    choose_replay(m, std::vector<int64_t>(sym.begin(), sym.end()), fetch);
    if (!ms.arena && host_arena && arena_bytes > 0) {
      // Methods sharing a host arena share its device copy too (the executor sized it).
      vulkan::Buffer& shared = arenas_[host_arena];
      if (!shared.valid()) {
        VRUN_ASSIGN_OR_RETURN(shared, ctx_->allocator().allocate(static_cast<uint64_t>(arena_bytes), vulkan::MemoryKind::kDevice,
                                                                 "scratch arena of method " + m.name));
      }
      ms.arena = &shared;
    }
    ms.inputs.resize(m.values.size());
    ms.fresh.assign(m.values.size(), 0);
    for (size_t v = 0; v < m.values.size(); ++v) {
      const ValueDef& d = m.values[v];
      if (d.kind == ValueKind::kInput) ms.fresh[v] = kHost;
      if (d.kind == ValueKind::kConstant) ms.fresh[v] = kHost | (constants_[d.index].valid() ? kDevice : 0);
    }
    host_arena_ = host_arena;
    walk_uploads_.clear();
    return Status::ok();
  }

  // A replay's entry holds its capture, and the walk was kept with it.
  bool walk_skippable() const override { return call_mode_ == kReplay && call_; }

  Status replay_walk(const MethodDef& m, std::span<const ValueStorage> storage) override {
    if (!walk_skippable()) return err(ErrorCode::kInternal, "vulkan: method '", m.name, "' has no captured walk to replay");
    MethodState& ms = method_state(m);
    for (int r : call_->uploads) VRUN_RETURN_IF_ERROR(to_device(m, ms, r, storage));
    ms.fresh = call_->walk_fresh;
    state_fresh_ = call_->walk_states;
    rec_->replay_all_ops();
    return Status::ok();
  }

  Status run(const NodeCall& c) override {
    if (!c.method) return err(ErrorCode::kUnsupported, "vulkan: runs nodes of a program only");
    const MethodDef& m = *c.method;
    const auto& in = c.in;
    const auto& out = c.out;
    const auto& in_roots = c.in_roots;
    const auto& out_roots = c.out_roots;
    const auto& storage = c.storage;
    MethodState& ms = method_state(m);
    // Reused between nodes: recording a decode step is hundreds of these calls.
    std::vector<vulkan::DeviceView>& din = din_;
    std::vector<vulkan::DeviceView>& dout = dout_;
    din.assign(in.size(), vulkan::DeviceView{});
    dout.assign(out.size(), vulkan::DeviceView{});
    for (size_t k = 0; k < in.size(); ++k) {
      if (!in[k].present() || in_roots[k] < 0) continue;
      VRUN_RETURN_IF_ERROR(to_device(m, ms, in_roots[k], storage));
      VRUN_ASSIGN_OR_RETURN(din[k], device_view(m, ms, in[k], in_roots[k], storage));
    }
    for (size_t k = 0; k < out.size(); ++k) {
      VRUN_ASSIGN_OR_RETURN(dout[k], device_view(m, ms, out[k], out_roots[k], storage));
    }
    VRUN_RETURN_IF_ERROR(rec_->record(m.nodes[c.node].op, din, dout, *c.attrs));
    for (int r : out_roots) set_fresh(m, ms, r, kDevice);
    return Status::ok();
  }

  Status sync_to_host(const MethodDef& m, std::span<const int> roots, std::span<const ValueStorage> storage) override {
    MethodState& ms = method_state(m);
    const bool finishing = finishing_;
    finishing_ = false;
    bool any = false;
    for (int r : roots) {
      if (r < 0 || (fresh(m, ms, r) & kHost) || !(fresh(m, ms, r) & kDevice)) continue;
      VRUN_ASSIGN_OR_RETURN(vulkan::BufferRef ref, device_ref(m, ms, r, storage));
      VRUN_RETURN_IF_ERROR(rec_->record_download(ref, 0, storage[r].host, static_cast<uint64_t>(storage[r].bytes)));
      set_fresh(m, ms, r, kHost | kDevice);
      any = true;
    }
    if (any || rec_->dispatch_count() > 0) {
      if (!finishing) {
        // A host round trip inside the call (a node on the CPU): such calls are not replayed.
        if (rec_->replaying())
          return err(ErrorCode::kInternal, "vulkan: a replayed call of method '", m.name, "' synchronised part way");
        if (rec_->capturing()) {
          rec_->cancel_capture();
          if (call_) call_->never = true;
        }
      }
      VRUN_RETURN_IF_ERROR(rec_->submit_and_wait());
    }
    return Status::ok();
  }

  void host_written(const MethodDef& m, std::span<const int> roots) override {
    MethodState& ms = method_state(m);
    for (int r : roots)
      if (r >= 0) set_fresh(m, ms, r, kHost);
  }

  Status finish(const MethodDef& m, std::span<const int> output_roots, std::span<const ValueStorage> storage) override {
    finishing_ = true;
    // What a replay may restore in place of walking the nodes again (kept if the capture is).
    std::vector<uint8_t> walk_fresh, walk_states;
    if (call_mode_ == kCapture) {
      walk_fresh = method_state(m).fresh;
      walk_states = state_fresh_;
    }
    Status s = sync_to_host(m, output_roots, storage);
    if (call_) {
      if (auto cap = rec_->end_capture()) {
        call_->uploads = walk_uploads_;
        call_->walk_fresh = std::move(walk_fresh);
        call_->walk_states = std::move(walk_states);
        call_->cap = std::move(cap);
        captures_++;
        evict_captures();
      } else if (call_mode_ == kCapture) {
        call_->never = true;  // given up part way: record this call normally from now on
      }
      if (!s.is_ok()) forget(*call_);
    }
    call_ = nullptr;
    call_mode_ = kNormal;
    return s;
  }

  void states_reset() override { state_fresh_.assign(state_fresh_.size(), kHost | kZero); }

  // ---- replay of repeated calls
  // A call is decided by its method, its symbol values, the outputs it brings back and which
  // states are current on the device; inputs and outputs go through staging that a replay
  // refills. The first time a call is seen it is recorded as usual, the second time captured,
  // from then on replayed: a decode step of a model whose positions come round again (each
  // Whisper window, every Parakeet decode call) then costs one submit instead of a recording.
  struct CallKey {
    const MethodDef* m;
    std::vector<int64_t> sym;
    uint64_t fetch;
    std::vector<uint8_t> states;
    bool operator<(const CallKey& o) const {
      return std::tie(m, sym, fetch, states) < std::tie(o.m, o.sym, o.fetch, o.states);
    }
  };
  struct CallEntry {
    int seen = 0;
    bool never = false;
    std::shared_ptr<vulkan::Recorder::Capture> cap;
    uint64_t used = 0;
    // The captured call's walk (kept with cap): the roots it put on the device, in order, and
    // the residency of the method's values and the states it left.
    std::vector<int> uploads;
    std::vector<uint8_t> walk_fresh, walk_states;
  };
  enum Mode { kNormal, kCapture, kReplay };
  static constexpr size_t kMaxCaptures = 512, kMaxKeys = 16384;

  void choose_replay(const MethodDef& m, const std::vector<int64_t>& sym, uint64_t fetch) {
    if (call_) forget(*call_);  // the previous call failed part way
    rec_->reset_call_mode();
    call_ = nullptr;
    call_mode_ = kNormal;
    finishing_ = false;
    if (calls_.size() >= kMaxKeys) {
      // Calls that never repeat (a decode position each): keep the captures, forget the rest.
      for (auto it = calls_.begin(); it != calls_.end();) it = it->second.cap ? std::next(it) : calls_.erase(it);
      if (calls_.size() >= kMaxKeys) return;
    }
    CallEntry& e = calls_[CallKey{&m, sym, fetch, state_fresh_}];
    e.used = ++clock_;
    e.seen++;
    call_ = &e;
    if (e.cap) {
      rec_->begin_replay(e.cap);
      call_mode_ = rec_->replaying() ? kReplay : kNormal;
      if (call_mode_ == kReplay) replayed_++;
    } else if (!e.never && e.seen >= 2 && rec_->begin_capture()) {
      call_mode_ = kCapture;
    }
  }

  void forget(CallEntry& e) {
    if (e.cap) captures_--;
    e.cap.reset();
    e.never = true;
  }

  void evict_captures() {
    while (captures_ > kMaxCaptures) {
      CallEntry* oldest = nullptr;
      for (auto& [k, e] : calls_)
        if (e.cap && (!oldest || e.used < oldest->used)) oldest = &e;
      if (!oldest) return;
      oldest->cap.reset();
      oldest->seen = 0;
      captures_--;
    }
  }

  // An input buffer of m was reallocated: captures of m point at the old one.
  void drop_captures(const MethodDef& m) {
    for (auto& [k, e] : calls_)
      if (k.m == &m && e.cap) {
        e.cap.reset();
        e.seen = 0;
        captures_--;
      }
  }
  uint64_t validation_errors() const override { return ctx_->validation_errors(); }
  uint64_t replayed_calls() const override { return replayed_; }

 private:
  struct MethodState {
    vulkan::Buffer* arena = nullptr;  // in arenas_
    std::vector<vulkan::Buffer> inputs;  // per value id (inputs only)
    std::vector<uint8_t> fresh;          // per value id (states live in state_fresh_)
  };

  MethodState& method_state(const MethodDef& m) {
    if (&m != last_method_) {
      last_method_ = &m;
      last_state_ = &methods_[&m];  // std::map nodes stay put
    }
    return *last_state_;
  }

  uint8_t fresh(const MethodDef& m, const MethodState& ms, int r) const {
    const ValueDef& d = m.values[r];
    return d.kind == ValueKind::kState ? state_fresh_[d.index] : ms.fresh[r];
  }
  void set_fresh(const MethodDef& m, MethodState& ms, int r, uint8_t f) {
    const ValueDef& d = m.values[r];
    if (d.kind == ValueKind::kState) state_fresh_[d.index] = f;
    else ms.fresh[r] = f;
  }

  Result<vulkan::BufferRef> device_ref(const MethodDef& m, MethodState& ms, int r, std::span<const ValueStorage> storage) {
    const ValueDef& d = m.values[r];
    switch (d.kind) {
      case ValueKind::kConstant: return constants_[d.index].ref();
      case ValueKind::kState: return states_[d.index].ref();
      case ValueKind::kInput: {
        const uint64_t bytes = std::max<uint64_t>(static_cast<uint64_t>(storage[r].bytes), 4);
        if (!ms.inputs[r].valid() || ms.inputs[r].size() < bytes) {
          if (rec_->replaying()) return err(ErrorCode::kInternal, "vulkan: a replayed call needs a larger input buffer");
          // Small inputs in host-mapped device memory: to_device writes them there directly.
          const bool direct = bytes <= vulkan::kSmallUploadBytes && ctx_->allocator().upload_is_device_local();
          VRUN_ASSIGN_OR_RETURN(ms.inputs[r], ctx_->allocator().allocate(bytes, direct ? vulkan::MemoryKind::kUpload
                                                                                       : vulkan::MemoryKind::kDevice,
                                                                         "input " + d.name));
          drop_captures(m);
        }
        return ms.inputs[r].ref();
      }
      case ValueKind::kIntermediate: {
        vulkan::BufferRef ref = ms.arena->ref();
        ref.offset += static_cast<uint64_t>(d.arena_offset);
        ref.size = static_cast<uint64_t>(d.arena_size);
        if (ref.mapped) ref.mapped = static_cast<uint8_t*>(ref.mapped) + d.arena_offset;
        return ref;
      }
    }
    return err(ErrorCode::kInternal, "value ", r, " has no device storage");
  }

  Status to_device(const MethodDef& m, MethodState& ms, int r, std::span<const ValueStorage> storage) {
    const uint8_t f = fresh(m, ms, r);
    if (f & kDevice) return Status::ok();
    VRUN_ASSIGN_OR_RETURN(vulkan::BufferRef ref, device_ref(m, ms, r, storage));
    // A call's inputs are written before any of its work is submitted that reads them, and the
    // previous call has finished: a mapped input buffer takes the host's bytes directly.
    if (storage[r].bytes > 0 && m.values[r].kind == ValueKind::kInput && ref.mapped)
      std::memcpy(ref.mapped, storage[r].host, static_cast<size_t>(storage[r].bytes));
    else if ((f & kZero) && storage[r].bytes % 4 == 0)
      VRUN_RETURN_IF_ERROR(rec_->record_zero(ref, 0, static_cast<uint64_t>(storage[r].bytes)));
    else if (storage[r].bytes > 0)
      VRUN_RETURN_IF_ERROR(rec_->record_upload(storage[r].host, ref, 0, static_cast<uint64_t>(storage[r].bytes)));
    set_fresh(m, ms, r, f | kDevice);
    walk_uploads_.push_back(r);
    return Status::ok();
  }

  Result<vulkan::DeviceView> device_view(const MethodDef& m, MethodState& ms, const TensorView& v, int r,
                                         std::span<const ValueStorage> storage) {
    VRUN_ASSIGN_OR_RETURN(vulkan::BufferRef ref, device_ref(m, ms, r, storage));
    const int64_t off = static_cast<const uint8_t*>(v.data) - storage[r].host;
    if (off < 0) return err(ErrorCode::kInternal, "view lies before its storage");
    vulkan::DeviceView d;
    d.buffer = ref;
    d.offset = static_cast<uint64_t>(off);
    d.dtype = v.dtype;
    d.shape = v.shape;
    d.strides = v.strides;
    return d;
  }

  const Program* program_ = nullptr;
  std::unique_ptr<vulkan::Context> ctx_;
  std::unique_ptr<vulkan::Recorder> rec_;
  std::vector<vulkan::Buffer> constants_, states_;
  std::vector<uint8_t> state_fresh_;
  std::map<const MethodDef*, std::vector<bool>> on_gpu_;
  std::map<const MethodDef*, MethodState> methods_;
  uint8_t* host_arena_ = nullptr;
  // Device copies of the scratch arenas, by their host arena (methods may share one).
  std::map<const uint8_t*, vulkan::Buffer> arenas_;
  const MethodDef* last_method_ = nullptr;
  mutable const MethodDef* flags_method_ = nullptr;  // runs_on_gpu's last lookup
  mutable const std::vector<bool>* flags_ = nullptr;
  MethodState* last_state_ = nullptr;
  std::vector<vulkan::DeviceView> din_, dout_;
  std::vector<int> walk_uploads_;  // roots this call's walk put on the device, in order
  // Declared after rec_: captures go before the recorder whose command pool they came from.
  std::map<CallKey, CallEntry> calls_;
  CallEntry* call_ = nullptr;  // this call's entry (std::map nodes stay put)
  Mode call_mode_ = kNormal;
  bool finishing_ = false;
  size_t captures_ = 0;
  uint64_t clock_ = 0, replayed_ = 0;
};


// The Vulkan devices this machine has (`vrun info`).
std::vector<std::string> describe_vulkan() {
  std::vector<std::string> lines;
  const auto devices = vulkan::Context::list_devices();
  if (devices.empty()) lines.push_back("vulkan devices: none (the CPU backend runs everything)");
  for (const auto& d : devices) {
    const char* cm = d.coopmat_khr ? (d.coopmat2 ? "KHR + NV 2" : "KHR") : (d.coopmat_nv ? "NV" : "no");
    lines.push_back("vulkan device " + std::to_string(d.index) + ": " + d.name + " (" + d.type + "), " +
                    human_bytes(d.device_local_bytes) + ", subgroup " + std::to_string(d.subgroup_size) + ", fp16 " +
                    (d.fp16 ? "yes" : "no") + ", int8 " + (d.int8 ? "yes" : "no") + ", cooperative matrix " + cm +
                    (d.multiprocessors ? ", " + std::to_string(d.multiprocessors) + " multiprocessors" : ""));
  }
  return lines;
}

const bool registered = [] {
  register_backend({"vulkan", /*host=*/false,
                    [](const Program* program, const BackendOptions& o) -> Result<std::unique_ptr<Backend>> {
                      if (!program) return err(ErrorCode::kUnsupported, "vulkan: runs programs only");
                      auto b = std::make_unique<VulkanBackend>();
                      VRUN_RETURN_IF_ERROR(b->init(*program, o));
                      return std::unique_ptr<Backend>(std::move(b));
                    },
                    describe_vulkan,
                    [] { return static_cast<int>(vulkan::Context::list_devices().size()); },
                    [](int device) {
                      const auto d = vulkan::Context::device_for(device);
                      return d && !is_cpu_implementation(*d);
                    }});
  return true;
}();

}  // namespace
}  // namespace vrun
