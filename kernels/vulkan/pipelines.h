// Compute pipelines from the SPIR-V embedded at build time, cached by (kernel, specialisation
// constants). Every kernel shares one layout: five storage buffers in set 0 and 128 bytes of
// push constants (the minimum every device guarantees), so recording never creates layouts.
//
// The driver's compiled pipelines persist between runs in a file (a VkPipelineCache's data) under
// $VRUN_PIPELINE_CACHE, else ${VRUN_CACHE:-~/.cache/vrun}/pipelines; VRUN_PIPELINE_CACHE=0 turns
// that off. One file per device, driver version and set of embedded kernels: a new build's file
// replaces the old one of the same device. A first call that compiles its pipelines (up to
// seconds each for the cooperative-matrix kernels) pays that once per machine and build. A second
// file beside it lists the pipelines (kernel and constants); the next context creates them at
// init on up to 8 threads, before any call needs them (not on CPU implementations, where that
// means compiling them; VRUN_PIPELINE_PREWARM=0|1 overrides). A pipeline that a recording needs and
// the cache lacks is created on a thread of its own while the recording goes on (start(); the
// recorder holds its commands back until it submits them), so a call's new pipelines compile side
// by side rather than one after another.
#pragma once

#include <vulkan/vulkan.h>

#include <algorithm>
#include <cstdint>
#include <future>
#include <memory>
#include <map>
#include <mutex>
#include <span>
#include <string>
#include <string_view>
#include <unordered_map>
#include <utility>
#include <vector>

#include "runtime/base/status.h"

namespace vrun::vulkan {

class Context;

constexpr int kNumBindings = 13;
constexpr uint32_t kPushConstantBytes = 128;

class PipelineCache {
 public:
  explicit PipelineCache(Context& ctx) : ctx_(ctx) {}
  ~PipelineCache();
  Status init();
  // The file the pipelines persist in ("" when off), and the bytes read from it at init.
  const std::string& file() const { return file_; }
  size_t loaded_bytes() const { return loaded_bytes_; }
  // Writes the cache's data to file() when it holds pipelines the file lacked (the destructor
  // does too). Failures only warn: the cache is an optimisation.
  void save();
  // At most this many pipelines of earlier runs are created at init (the keys file lists them).
  static constexpr size_t kMaxPrewarm = 1024;

  // Specialisation constant k of the shader gets spec[k] (constant_id = k). Errors name the kernel.
  // start() and waiting for it.
  Result<VkPipeline> get(std::string_view kernel, std::span<const int32_t> spec);

  // A pipeline being created on a thread of its own (start()).
  class Pending {
   public:
    // Blocks until it is made; the pipeline or the error naming the kernel.
    Result<VkPipeline> wait();

   private:
    friend class PipelineCache;
    PipelineCache* cache_ = nullptr;
    std::string kernel_;
    std::vector<int32_t> spec_;
    std::shared_future<std::pair<Result<VkPipeline>, double>> made_;  // and the seconds it took
  };
  struct Started {
    VkPipeline pipeline = VK_NULL_HANDLE;  // when it was there already
    std::shared_ptr<Pending> pending;      // else, being created
  };
  // The pipeline if the cache has it, else its creation started on another thread, so that a
  // recording meeting several new pipelines (a first call on a machine whose cache lacks them:
  // up to seconds each for the tensor-core kernels) has them compiled side by side. Errors before
  // the creation starts (a kernel this binary lacks) come back at once. Looked up once per
  // recorded dispatch: the hit path allocates nothing.
  Result<Started> start(std::string_view kernel, std::span<const int32_t> spec);
  // Whether the binary embeds a kernel (cooperative-matrix variants need a capable compiler).
  static bool has_kernel(const std::string& kernel);
  static std::vector<std::string> kernel_names();

  VkPipelineLayout layout() const { return layout_; }
  VkDescriptorSetLayout set_layout() const { return set_layout_; }
  size_t size() const;  // pipelines made or being made

 private:
  Context& ctx_;
  mutable std::mutex mu_;
  VkDescriptorSetLayout set_layout_ = VK_NULL_HANDLE;
  VkPipelineLayout layout_ = VK_NULL_HANDLE;
  VkPipelineCache cache_ = VK_NULL_HANDLE;
  std::map<std::string, VkShaderModule> modules_;
  struct Key {
    std::string kernel;
    std::vector<int32_t> spec;
  };
  struct KeyView {
    std::string_view kernel;
    std::span<const int32_t> spec;
  };
  struct KeyHash {
    using is_transparent = void;
    size_t operator()(const KeyView& k) const;
    size_t operator()(const Key& k) const { return (*this)(KeyView{k.kernel, k.spec}); }
  };
  struct KeyEq {
    using is_transparent = void;
    static bool eq(const KeyView& a, const KeyView& b) {
      return a.kernel == b.kernel && std::equal(a.spec.begin(), a.spec.end(), b.spec.begin(), b.spec.end());
    }
    bool operator()(const Key& a, const Key& b) const { return eq({a.kernel, a.spec}, {b.kernel, b.spec}); }
    bool operator()(const KeyView& a, const Key& b) const { return eq(a, {b.kernel, b.spec}); }
    bool operator()(const Key& a, const KeyView& b) const { return eq({a.kernel, a.spec}, b); }
  };
  std::unordered_map<Key, VkPipeline, KeyHash, KeyEq> pipelines_;
  // Pipelines being created (start()), until a wait() files them in pipelines_.
  std::unordered_map<Key, std::shared_ptr<Pending>, KeyHash, KeyEq> pending_;
  // Files a pending pipeline's result (mu_ not held); the result.
  Result<VkPipeline> settle(Pending& p);
  // The kernel's shader module (mu_ held); a pipeline of it (thread-safe: no member changes).
  Result<VkShaderModule> module_locked(const std::string& kernel);
  Result<VkPipeline> create(VkShaderModule module, const std::string& kernel, std::span<const int32_t> spec) const;
  // Creates these pipelines on up to 8 threads; failures are left to get() to meet and report.
  void prewarm(const std::vector<Key>& keys);
  // The file beside file() that lists the pipelines created (kernel and constants, one a line).
  std::string keys_file() const;
  // Time spent creating the pipelines calls asked for, summed over the threads that made them
  // (start(); VRUN_VK_STATS prints it).
  double create_s_ = 0;
  std::string file_;
  size_t loaded_bytes_ = 0;
};

}  // namespace vrun::vulkan
