#include "runtime/backends/vulkan/pipelines.h"

#include <cstring>

#include "runtime/backends/vulkan/context.h"
#include "vrun_vk_shaders.h"

namespace vrun::vulkan {

namespace {
const EmbeddedShader* find(const std::string& name) {
  for (size_t i = 0; i < kEmbeddedShaderCount; ++i)
    if (name == kEmbeddedShaders[i].name) return &kEmbeddedShaders[i];
  return nullptr;
}
}  // namespace

bool PipelineCache::has_kernel(const std::string& kernel) { return find(kernel) != nullptr; }

std::vector<std::string> PipelineCache::kernel_names() {
  std::vector<std::string> out;
  for (size_t i = 0; i < kEmbeddedShaderCount; ++i) out.emplace_back(kEmbeddedShaders[i].name);
  return out;
}

Status PipelineCache::init() {
  VkDescriptorSetLayoutBinding b[kNumBindings];
  for (int i = 0; i < kNumBindings; ++i)
    b[i] = {static_cast<uint32_t>(i), VK_DESCRIPTOR_TYPE_STORAGE_BUFFER, 1, VK_SHADER_STAGE_COMPUTE_BIT, nullptr};
  VkDescriptorSetLayoutCreateInfo dl{VK_STRUCTURE_TYPE_DESCRIPTOR_SET_LAYOUT_CREATE_INFO};
  dl.bindingCount = kNumBindings;
  dl.pBindings = b;
  if (ctx_.push_descriptor_fn()) dl.flags = VK_DESCRIPTOR_SET_LAYOUT_CREATE_PUSH_DESCRIPTOR_BIT_KHR;
  VRUN_VK_CHECK(vkCreateDescriptorSetLayout(ctx_.device(), &dl, nullptr, &set_layout_), "creating the descriptor set layout");
  VkPushConstantRange pc{VK_SHADER_STAGE_COMPUTE_BIT, 0, kPushConstantBytes};
  VkPipelineLayoutCreateInfo pl{VK_STRUCTURE_TYPE_PIPELINE_LAYOUT_CREATE_INFO};
  pl.setLayoutCount = 1;
  pl.pSetLayouts = &set_layout_;
  pl.pushConstantRangeCount = 1;
  pl.pPushConstantRanges = &pc;
  VRUN_VK_CHECK(vkCreatePipelineLayout(ctx_.device(), &pl, nullptr, &layout_), "creating the pipeline layout");
  VkPipelineCacheCreateInfo ci{VK_STRUCTURE_TYPE_PIPELINE_CACHE_CREATE_INFO};
  VRUN_VK_CHECK(vkCreatePipelineCache(ctx_.device(), &ci, nullptr, &cache_), "creating the pipeline cache");
  return Status::ok();
}

PipelineCache::~PipelineCache() {
  VkDevice dev = ctx_.device();
  for (auto& [k, p] : pipelines_) vkDestroyPipeline(dev, p, nullptr);
  for (auto& [k, m] : modules_) vkDestroyShaderModule(dev, m, nullptr);
  if (cache_) vkDestroyPipelineCache(dev, cache_, nullptr);
  if (layout_) vkDestroyPipelineLayout(dev, layout_, nullptr);
  if (set_layout_) vkDestroyDescriptorSetLayout(dev, set_layout_, nullptr);
}

size_t PipelineCache::size() const {
  std::lock_guard<std::mutex> lock(mu_);
  return pipelines_.size();
}

size_t PipelineCache::KeyHash::operator()(const KeyView& k) const {
  size_t h = std::hash<std::string_view>()(k.kernel);
  for (int32_t v : k.spec) h = h * 1000003u ^ static_cast<size_t>(static_cast<uint32_t>(v));
  return h;
}

Result<VkPipeline> PipelineCache::get(std::string_view kernel_name, std::span<const int32_t> spec) {
  std::lock_guard<std::mutex> lock(mu_);
  if (auto it = pipelines_.find(KeyView{kernel_name, spec}); it != pipelines_.end()) return it->second;

  const std::string kernel(kernel_name);
  VkShaderModule module = VK_NULL_HANDLE;
  if (auto it = modules_.find(kernel); it != modules_.end()) {
    module = it->second;
  } else {
    const EmbeddedShader* s = find(kernel);
    if (!s) return err(ErrorCode::kUnsupported, "vulkan: kernel '", kernel, "' is not built into this binary");
    std::vector<uint32_t> words(s->size / 4);
    std::memcpy(words.data(), s->data, words.size() * 4);
    VkShaderModuleCreateInfo mi{VK_STRUCTURE_TYPE_SHADER_MODULE_CREATE_INFO};
    mi.codeSize = words.size() * 4;
    mi.pCode = words.data();
    VRUN_VK_CHECK(vkCreateShaderModule(ctx_.device(), &mi, nullptr, &module), "creating shader module " + kernel);
    modules_[kernel] = module;
  }
  std::vector<VkSpecializationMapEntry> entries(spec.size());
  for (size_t i = 0; i < spec.size(); ++i)
    entries[i] = {static_cast<uint32_t>(i), static_cast<uint32_t>(i * 4), 4};
  VkSpecializationInfo si{static_cast<uint32_t>(entries.size()), entries.data(), spec.size() * 4, spec.data()};
  VkComputePipelineCreateInfo ci{VK_STRUCTURE_TYPE_COMPUTE_PIPELINE_CREATE_INFO};
  ci.stage = {VK_STRUCTURE_TYPE_PIPELINE_SHADER_STAGE_CREATE_INFO};
  ci.stage.stage = VK_SHADER_STAGE_COMPUTE_BIT;
  ci.stage.module = module;
  ci.stage.pName = "main";
  ci.stage.pSpecializationInfo = spec.empty() ? nullptr : &si;
  ci.layout = layout_;
  VkPipeline p = VK_NULL_HANDLE;
  VRUN_VK_CHECK(vkCreateComputePipelines(ctx_.device(), cache_, 1, &ci, nullptr, &p), "creating pipeline " + kernel);
  pipelines_.emplace(Key{kernel, std::vector<int32_t>(spec.begin(), spec.end())}, p);
  return p;
}

}  // namespace vrun::vulkan
