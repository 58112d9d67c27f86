#include "runtime/base/knobs.h"
#include "kernels/vulkan/pipelines.h"

#include <unistd.h>

#include <atomic>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <future>
#include <fstream>
#include <sstream>
#include <string_view>
#include <system_error>
#include <thread>

#include "kernels/vulkan/context.h"
#include "vrun_vk_shaders.h"

namespace vrun::vulkan {

namespace {
const EmbeddedShader* find(const std::string& name) {
  for (size_t i = 0; i < kEmbeddedShaderCount; ++i)
    if (name == kEmbeddedShaders[i].name) return &kEmbeddedShaders[i];
  return nullptr;
}
bool stats_on() { return vk_stats_level() > 0; }

// FNV-1a over every embedded kernel: the set of kernels this binary carries (once a process).
uint64_t kernels_hash() {
  static const uint64_t hash = [] {
    uint64_t h = 1469598103934665603ull;
    for (size_t i = 0; i < kEmbeddedShaderCount; ++i) {
      for (const char* c = kEmbeddedShaders[i].name; *c; ++c) h = (h ^ static_cast<unsigned char>(*c)) * 1099511628211ull;
      for (size_t k = 0; k < kEmbeddedShaders[i].size; ++k) h = (h ^ kEmbeddedShaders[i].data[k]) * 1099511628211ull;
    }
    return h;
  }();
  return hash;
}

// Writes `data` to `path` through a file beside it renamed over it, so a reader sees the old
// contents or the new, whole. False (and nothing left behind) when it cannot.
bool write_replacing(const std::filesystem::path& path, std::string_view data) {
  std::error_code ec;
  const std::filesystem::path tmp = path.string() + "." + std::to_string(getpid()) + ".tmp";
  {
    std::ofstream f(tmp, std::ios::binary | std::ios::trunc);
    f.write(data.data(), static_cast<std::streamsize>(data.size()));
    f.close();
    if (f.good()) {
      std::filesystem::rename(tmp, path, ec);
      if (!ec) return true;
    }
  }
  std::filesystem::remove(tmp, ec);
  return false;
}

// The folder the cache files live in, "" when persisting is off.
std::string cache_dir() {
  if (const char* e = knob_value(Knob::VRUN_PIPELINE_CACHE); e && *e) return std::string(e) == "0" ? "" : e;
  if (const char* e = knob_value(Knob::VRUN_CACHE); e && *e) return std::string(e) + "/pipelines";
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
  // The pipelines earlier runs used, created now, in parallel, so that a first call does not
  // create them one by one while the GPU waits. Not on CPU implementations, where creating a
  // pipeline means compiling it (VRUN_PIPELINE_PREWARM=1 forces it, =0 turns it off).
  const char* pw = knob_value(Knob::VRUN_PIPELINE_PREWARM);
  const bool prewarm_on = pw && *pw ? std::string(pw) != "0" : ctx_.info().type != "cpu";
  if (!initial.empty() && prewarm_on) {
    std::vector<Key> keys;
    std::ifstream f(keys_file());
    std::string line;
    while (keys.size() < kMaxPrewarm && std::getline(f, line)) {
      std::istringstream in(line);
      Key k;
      if (!(in >> k.kernel)) continue;
      for (int32_t v; in >> v;) k.spec.push_back(v);
      if (in.eof() && k.spec.size() <= 64) keys.push_back(std::move(k));
    }
    if (!keys.empty()) prewarm(keys);
  }
  return Status::ok();
}

std::string PipelineCache::keys_file() const {
  return file_.empty() ? "" : file_.substr(0, file_.size() - 4) + ".keys";
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
  if (!write_replacing(path, std::string_view(data.data(), data.size()))) {
    std::fprintf(stderr, "vrun: warning: cannot write the pipeline cache %s (set VRUN_PIPELINE_CACHE to another folder, "
                 "or 0 to turn it off)\n", file_.c_str());
    return;
  }
  loaded_bytes_ = data.size();
  // The pipelines themselves (kernel and specialisation constants, one a line), for the next
  // run's prewarm: this run's, which include those it prewarmed from the file.
  std::ostringstream keys;
  for (const auto& [key, p] : pipelines_) {
    keys << key.kernel;
    for (int32_t v : key.spec) keys << ' ' << v;
    keys << '\n';
  }
  write_replacing(keys_file(), keys.str());
  // Files of this device and driver for other kernel sets are earlier builds' pipelines.
  const std::string mine = path.filename().string();
  const std::string stem = mine.substr(0, mine.size() - 4), prefix = stem.substr(0, stem.size() - 16);
  for (const auto& e : fs::directory_iterator(path.parent_path(), ec)) {
    const std::string name = e.path().filename().string();
    const bool bin = name.ends_with(".bin") && name.size() == mine.size();
    const bool keys = name.ends_with(".keys") && name.size() == mine.size() + 1;
    if (name.rfind(prefix, 0) == 0 && name.rfind(stem, 0) != 0 && (bin || keys)) fs::remove(e.path(), ec);
  }
  if (stats_on()) std::fprintf(stderr, "vulkan stats: pipeline cache %s: %zu bytes written\n", file_.c_str(), data.size());
}

PipelineCache::~PipelineCache() {
  // Pipelines still being created: waited for and filed, so that they are saved and destroyed.
  std::vector<std::shared_ptr<Pending>> pending;
  {
    std::lock_guard<std::mutex> lock(mu_);
    for (const auto& [key, p] : pending_) pending.push_back(p);
  }
  for (const auto& p : pending) (void)p->wait();
  if (stats_on() && !pipelines_.empty())
    std::fprintf(stderr,
                 "vulkan stats: %zu pipelines; %.1f ms creating those that calls asked for (summed over the threads "
                 "that made them side by side)\n",
                 pipelines_.size(), 1e3 * create_s_);
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
  return pipelines_.size() + pending_.size();
}

size_t PipelineCache::KeyHash::operator()(const KeyView& k) const {
  size_t h = std::hash<std::string_view>()(k.kernel);
  for (int32_t v : k.spec) h = h * 1000003u ^ static_cast<size_t>(static_cast<uint32_t>(v));
  return h;
}

Result<VkShaderModule> PipelineCache::module_locked(const std::string& kernel) {
  if (auto it = modules_.find(kernel); it != modules_.end()) return it->second;
  const EmbeddedShader* s = find(kernel);
  if (!s) return err(ErrorCode::kUnsupported, "vulkan: kernel '", kernel, "' is not built into this binary");
  std::vector<uint32_t> words(s->size / 4);
  std::memcpy(words.data(), s->data, words.size() * 4);
  VkShaderModuleCreateInfo mi{VK_STRUCTURE_TYPE_SHADER_MODULE_CREATE_INFO};
  mi.codeSize = words.size() * 4;
  mi.pCode = words.data();
  VkShaderModule module = VK_NULL_HANDLE;
  VRUN_VK_CHECK(vkCreateShaderModule(ctx_.device(), &mi, nullptr, &module), "creating shader module " + kernel);
  modules_[kernel] = module;
  return module;
}

Result<VkPipeline> PipelineCache::create(VkShaderModule module, const std::string& kernel, std::span<const int32_t> spec) const {
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
  return p;
}

Result<VkPipeline> PipelineCache::get(std::string_view kernel_name, std::span<const int32_t> spec) {
  VRUN_ASSIGN_OR_RETURN(Started st, start(kernel_name, spec));
  return st.pending ? st.pending->wait() : Result<VkPipeline>(st.pipeline);
}

Result<PipelineCache::Started> PipelineCache::start(std::string_view kernel_name, std::span<const int32_t> spec) {
  std::lock_guard<std::mutex> lock(mu_);
  if (auto it = pipelines_.find(KeyView{kernel_name, spec}); it != pipelines_.end()) return Started{it->second, nullptr};
  if (auto it = pending_.find(KeyView{kernel_name, spec}); it != pending_.end()) return Started{VK_NULL_HANDLE, it->second};
  auto p = std::make_shared<Pending>();
  p->cache_ = this;
  p->kernel_ = std::string(kernel_name);
  p->spec_.assign(spec.begin(), spec.end());
  VRUN_ASSIGN_OR_RETURN(VkShaderModule module, module_locked(p->kernel_));
  auto make = [this, module, kernel = p->kernel_, values = p->spec_]() {
    const auto t0 = std::chrono::steady_clock::now();
    Result<VkPipeline> r = create(module, kernel, values);
    return std::make_pair(std::move(r), std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count());
  };
  try {
    p->made_ = std::async(std::launch::async, make).share();
  } catch (const std::system_error&) {  // no thread to be had: made here, now
    std::promise<std::pair<Result<VkPipeline>, double>> done;
    done.set_value(make());
    p->made_ = done.get_future().share();
  }
  pending_.emplace(Key{p->kernel_, p->spec_}, p);
  return Started{VK_NULL_HANDLE, p};
}

Result<VkPipeline> PipelineCache::Pending::wait() { return cache_->settle(*this); }

Result<VkPipeline> PipelineCache::settle(Pending& p) {
  const std::pair<Result<VkPipeline>, double>& made = p.made_.get();
  std::lock_guard<std::mutex> lock(mu_);
  // The first to wait files it; a failure is forgotten, so that a later get() meets it again.
  if (auto it = pending_.find(KeyView{p.kernel_, p.spec_}); it != pending_.end() && it->second.get() == &p) {
    if (made.first.is_ok()) pipelines_.emplace(Key{p.kernel_, p.spec_}, *made.first);
    create_s_ += made.second;
    pending_.erase(it);
  }
  return made.first;
}

void PipelineCache::prewarm(const std::vector<Key>& keys) {
  const auto t0 = std::chrono::steady_clock::now();
  std::vector<VkShaderModule> modules(keys.size(), VK_NULL_HANDLE);
  {
    std::lock_guard<std::mutex> lock(mu_);
    for (size_t i = 0; i < keys.size(); ++i) {
      if (pipelines_.count(keys[i])) continue;
      auto m = module_locked(keys[i].kernel);
      if (m.is_ok()) modules[i] = *m;  // a kernel this build lacks: nothing to create
    }
  }
  // Pipeline creation with a shared VkPipelineCache is thread-safe; the driver does the work.
  std::vector<VkPipeline> made(keys.size(), VK_NULL_HANDLE);
  std::atomic<size_t> next{0};
  auto work = [&]() {
    for (size_t i; (i = next.fetch_add(1)) < keys.size();)
      if (modules[i]) {
        auto p = create(modules[i], keys[i].kernel, keys[i].spec);
        if (p.is_ok()) made[i] = *p;
      }
  };
  const size_t threads = std::min<size_t>({8, std::max(1u, std::thread::hardware_concurrency()), keys.size()});
  std::vector<std::thread> pool;
  for (size_t t = 1; t < threads; ++t) pool.emplace_back(work);
  work();
  for (auto& t : pool) t.join();
  std::lock_guard<std::mutex> lock(mu_);
  size_t n = 0;
  for (size_t i = 0; i < keys.size(); ++i) {
    if (!made[i]) continue;
    if (pipelines_.emplace(keys[i], made[i]).second) ++n;
    else vkDestroyPipeline(ctx_.device(), made[i], nullptr);
  }
  if (stats_on())
    std::fprintf(stderr, "vulkan stats: %zu pipelines of earlier runs created at load in %.1f ms on %zu threads\n", n,
                 1e3 * std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count(), threads);
}

}  // namespace vrun::vulkan
