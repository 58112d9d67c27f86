// Compute pipelines from the SPIR-V embedded at build time, cached by (kernel, specialisation
// constants). Every kernel shares one layout: five storage buffers in set 0 and 128 bytes of
// push constants (the minimum every device guarantees), so recording never creates layouts.
#pragma once

#include <vulkan/vulkan.h>

#include <cstdint>
#include <map>
#include <mutex>
#include <string>
#include <utility>
#include <vector>

#include "runtime/status.h"

namespace vrun::vulkan {

class Context;

constexpr int kNumBindings = 5;
constexpr uint32_t kPushConstantBytes = 128;

class PipelineCache {
 public:
  explicit PipelineCache(Context& ctx) : ctx_(ctx) {}
  ~PipelineCache();
  Status init();

  // Specialisation constant k of the shader gets spec[k] (constant_id = k). Errors name the kernel.
  Result<VkPipeline> get(const std::string& kernel, const std::vector<int32_t>& spec);
  // Whether the binary embeds a kernel (cooperative-matrix variants need a capable compiler).
  static bool has_kernel(const std::string& kernel);
  static std::vector<std::string> kernel_names();

  VkPipelineLayout layout() const { return layout_; }
  VkDescriptorSetLayout set_layout() const { return set_layout_; }
  size_t size() const;

 private:
  Context& ctx_;
  mutable std::mutex mu_;
  VkDescriptorSetLayout set_layout_ = VK_NULL_HANDLE;
  VkPipelineLayout layout_ = VK_NULL_HANDLE;
  VkPipelineCache cache_ = VK_NULL_HANDLE;
  std::map<std::string, VkShaderModule> modules_;
  std::map<std::pair<std::string, std::vector<int32_t>>, VkPipeline> pipelines_;
};

}  // namespace vrun::vulkan
