#include "runtime/backends/vulkan/pipelines.h"

#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <system_error>
#include <unistd.h>

#include "runtime/backends/vulkan/context.h"
#include "vrun_vk_shaders.h"

namespace vrun::vulkan {

namespace {
const EmbeddedShader* find(const std::string& name) {
  for (size_t i = 0; i < kEmbeddedShaderCount; ++i)
    if (name == kEmbeddedShaders[i].name) return &kEmbeddedShaders[i];
  return nullptr;
}
bool stats_on() {
  const char* st = std::getenv("VRUN_VK_STATS");
  return st && *st && std::string(st) != "0";
}

// FNV-1a over every embedded kernel: the set of kernels this binary carries.
uint64_t kernels_hash() {
  uint64_t h = 1469598103934665603ull;
  for (size_t i = 0; i < kEmbeddedShaderCount; ++i) {
    for (const char* c = kEmbeddedShaders[i].name; *c; ++c) h = (h ^ static_cast<unsigned char>(*c)) * 1099511628211ull;
    for (size_t k = 0; k < kEmbeddedShaders[i].size; ++k) h = (h ^ kEmbeddedShaders[i].data[k]) * 1099511628211ull;
  }
  return h;
}

// The folder the cache files live in, "" when persisting is off.
std::string cache_dir() {
  if (const char* e = std::getenv("VRUN_PIPELINE_CACHE"); e && *e) return std::string(e) == "0" ? "" : e;
  if (const char* e = std::getenv("VRUN_CACHE"); e && *e) return std::string(e) + "/pipelines";
  if (const char* h = std::getenv("HOME"); h && *h) return std::string(h) + "/.cache/vrun/pipelines";
  return "";
}

std::string hex(uint64_t v, int digits) {
  char b[17];
  std::snprintf(b, sizeof b, "%0*llx", digits, static_cast<unsigned long long>(v));
  return b;
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
  // The file for this device, driver and set of kernels: <device>-<driver>-<cache UUID>-<kernels>.
  std::vector<char> initial;
  if (const std::string dir = cache_dir(); !dir.empty()) {
    VkPhysicalDeviceProperties p;
    vkGetPhysicalDeviceProperties(ctx_.physical_device(), &p);
    std::string uuid;
    for (uint8_t b : p.pipelineCacheUUID) uuid += hex(b, 2);
    file_ = dir + "/" + hex(p.vendorID, 4) + "-" + hex(p.deviceID, 4) + "-" + hex(p.driverVersion, 8) + "-" + uuid + "-" +
            hex(kernels_hash(), 16) + ".bin";
    std::ifstream f(file_, std::ios::binary);
    if (f) initial.assign(std::istreambuf_iterator<char>(f), std::istreambuf_iterator<char>());
  }
  VkPipelineCacheCreateInfo ci{VK_STRUCTURE_TYPE_PIPELINE_CACHE_CREATE_INFO};
  ci.initialDataSize = initial.size();
  ci.pInitialData = initial.empty() ? nullptr : initial.data();
  // Data the driver does not take (another driver's, or damaged) leaves the cache empty; should
  // a driver refuse it outright instead, start empty.
  if (vkCreatePipelineCache(ctx_.device(), &ci, nullptr, &cache_) != VK_SUCCESS) {
    initial.clear();
    ci.initialDataSize = 0;
    ci.pInitialData = nullptr;
    VRUN_VK_CHECK(vkCreatePipelineCache(ctx_.device(), &ci, nullptr, &cache_), "creating the pipeline cache");
  }
  loaded_bytes_ = initial.size();
  if (stats_on() && !file_.empty())
    std::fprintf(stderr, "vulkan stats: pipeline cache %s: %zu bytes read\n", file_.c_str(), loaded_bytes_);
  return Status::ok();
}

void PipelineCache::save() {
  std::lock_guard<std::mutex> lock(mu_);
  if (file_.empty() || !cache_ || pipelines_.empty()) return;
  size_t n = 0;
  if (vkGetPipelineCacheData(ctx_.device(), cache_, &n, nullptr) != VK_SUCCESS || n == 0) return;
  // No pipeline the file lacked: the driver's data comes back the size it went in.
  if (n == loaded_bytes_) return;
  std::vector<char> data(n);
  if (vkGetPipelineCacheData(ctx_.device(), cache_, &n, data.data()) != VK_SUCCESS) return;
  data.resize(n);
  namespace fs = std::filesystem;
  std::error_code ec;
  const fs::path path(file_);
  fs::create_directories(path.parent_path(), ec);
  // Written aside, then renamed over the file: a reader sees the old data or the new, whole.
  const fs::path tmp = path.string() + "." + std::to_string(getpid()) + ".tmp";
  {
    std::ofstream f(tmp, std::ios::binary | std::ios::trunc);
    f.write(data.data(), static_cast<std::streamsize>(data.size()));
    if (!f.good()) {
      f.close();
      fs::remove(tmp, ec);
      std::fprintf(stderr, "vrun: warning: cannot write the pipeline cache %s (set VRUN_PIPELINE_CACHE to another folder, "
                   "or 0 to turn it off)\n", file_.c_str());
      return;
    }
  }
  fs::rename(tmp, path, ec);
  if (ec) {
    fs::remove(tmp, ec);
    return;
  }
  loaded_bytes_ = data.size();
  // Files of this device and driver for other kernel sets are earlier builds' pipelines.
  const std::string mine = path.filename().string();
  const std::string prefix = mine.substr(0, mine.size() - 16 - 4);
  for (const auto& e : fs::directory_iterator(path.parent_path(), ec)) {
    const std::string name = e.path().filename().string();
    if (name != mine && name.rfind(prefix, 0) == 0 && name.size() == mine.size() && name.ends_with(".bin"))
      fs::remove(e.path(), ec);
  }
  if (stats_on()) std::fprintf(stderr, "vulkan stats: pipeline cache %s: %zu bytes written\n", file_.c_str(), data.size());
}

PipelineCache::~PipelineCache() {
  if (stats_on() && !pipelines_.empty())
    std::fprintf(stderr, "vulkan stats: %zu pipelines created in %.1f ms of host time\n", pipelines_.size(), 1e3 * create_s_);
  save();
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

double PipelineCache::create_seconds() const {
  std::lock_guard<std::mutex> lock(mu_);
  return create_s_;
}

size_t PipelineCache::KeyHash::operator()(const KeyView& k) const {
  size_t h = std::hash<std::string_view>()(k.kernel);
  for (int32_t v : k.spec) h = h * 1000003u ^ static_cast<size_t>(static_cast<uint32_t>(v));
  return h;
}

Result<VkPipeline> PipelineCache::get(std::string_view kernel_name, std::span<const int32_t> spec) {
  std::lock_guard<std::mutex> lock(mu_);
  if (auto it = pipelines_.find(KeyView{kernel_name, spec}); it != pipelines_.end()) return it->second;

  const auto t0 = std::chrono::steady_clock::now();
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
  create_s_ += std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  return p;
}

}  // namespace vrun::vulkan
