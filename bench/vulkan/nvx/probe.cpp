// nvx_probe: how much shared memory a multiprocessor gives compute work on this Vulkan driver, and
// what f16 GEMMs of several structures reach under that limit when written in CUDA and launched
// from Vulkan command buffers (VK_NVX_binary_import) on Vulkan buffers. See README.md.
//
//   nvx_probe KERNELS.cubin OCCUPANCY.spv [--reps N]
#include <vulkan/vulkan.h>

#include <algorithm>
#include <bit>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <random>
#include <string>
#include <vector>

namespace {

[[noreturn]] void fail(const char* what, VkResult r) {
  std::fprintf(stderr, "nvx_probe: %s failed (VkResult %d)\n", what, r);
  std::exit(1);
}
#define CHECK(call)                                  \
  do {                                               \
    const VkResult r_ = (call);                      \
    if (r_ != VK_SUCCESS) fail(#call, r_);           \
  } while (0)

std::string slurp(const char* path) {
  std::ifstream f(path, std::ios::binary);
  if (!f) {
    std::fprintf(stderr, "nvx_probe: cannot read %s\n", path);
    std::exit(1);
  }
  return std::string(std::istreambuf_iterator<char>(f), {});
}

uint16_t to_half(float f) { return std::bit_cast<uint16_t>(static_cast<_Float16>(f)); }
double from_half(uint16_t b) { return static_cast<double>(std::bit_cast<_Float16>(b)); }

struct Gpu {
  VkInstance instance{};
  VkPhysicalDevice pd{};
  VkDevice dev{};
  VkQueue queue{};
  VkCommandPool pool{};
  VkCommandBuffer cb{};
  VkQueryPool timestamps{};
  VkPhysicalDeviceProperties props{};
  VkPhysicalDeviceMemoryProperties mem{};
  bool sm_builtins = false;  // VK_NV_shader_sm_builtins + VK_KHR_shader_clock: the shader probe
  PFN_vkCreateCuModuleNVX create_module{};
  PFN_vkCreateCuFunctionNVX create_function{};
  PFN_vkCmdCuLaunchKernelNVX launch{};

  void begin() {
    CHECK(vkResetCommandBuffer(cb, 0));
    VkCommandBufferBeginInfo bi{VK_STRUCTURE_TYPE_COMMAND_BUFFER_BEGIN_INFO};
    CHECK(vkBeginCommandBuffer(cb, &bi));
  }
  void submit_and_wait() {
    CHECK(vkEndCommandBuffer(cb));
    VkSubmitInfo si{VK_STRUCTURE_TYPE_SUBMIT_INFO};
    si.commandBufferCount = 1;
    si.pCommandBuffers = &cb;
    CHECK(vkQueueSubmit(queue, 1, &si, VK_NULL_HANDLE));
    CHECK(vkQueueWaitIdle(queue));
  }
  void barrier() {
    VkMemoryBarrier mb{VK_STRUCTURE_TYPE_MEMORY_BARRIER};
    mb.srcAccessMask = VK_ACCESS_MEMORY_WRITE_BIT;
    mb.dstAccessMask = VK_ACCESS_MEMORY_READ_BIT | VK_ACCESS_MEMORY_WRITE_BIT;
    vkCmdPipelineBarrier(cb, VK_PIPELINE_STAGE_ALL_COMMANDS_BIT, VK_PIPELINE_STAGE_ALL_COMMANDS_BIT, 0, 1, &mb, 0,
                         nullptr, 0, nullptr);
  }
};

bool has_extension(VkPhysicalDevice pd, const char* name) {
  uint32_t n = 0;
  vkEnumerateDeviceExtensionProperties(pd, nullptr, &n, nullptr);
  std::vector<VkExtensionProperties> ext(n);
  vkEnumerateDeviceExtensionProperties(pd, nullptr, &n, ext.data());
  for (const auto& e : ext)
    if (!std::strcmp(e.extensionName, name)) return true;
  return false;
}

Gpu open_gpu() {
  Gpu g;
  VkApplicationInfo app{VK_STRUCTURE_TYPE_APPLICATION_INFO};
  app.apiVersion = VK_API_VERSION_1_3;
  VkInstanceCreateInfo ici{VK_STRUCTURE_TYPE_INSTANCE_CREATE_INFO};
  ici.pApplicationInfo = &app;
  CHECK(vkCreateInstance(&ici, nullptr, &g.instance));
  uint32_t n = 0;
  vkEnumeratePhysicalDevices(g.instance, &n, nullptr);
  std::vector<VkPhysicalDevice> pds(n);
  vkEnumeratePhysicalDevices(g.instance, &n, pds.data());
  for (VkPhysicalDevice pd : pds)
    if (has_extension(pd, "VK_NVX_binary_import")) {
      g.pd = pd;
      break;
    }
  if (!g.pd) {
    std::fprintf(stderr, "nvx_probe: no device offers VK_NVX_binary_import (an NVIDIA driver does)\n");
    std::exit(1);
  }
  vkGetPhysicalDeviceProperties(g.pd, &g.props);
  vkGetPhysicalDeviceMemoryProperties(g.pd, &g.mem);
  g.sm_builtins = has_extension(g.pd, "VK_NV_shader_sm_builtins") && has_extension(g.pd, "VK_KHR_shader_clock");
  std::vector<const char*> ext{"VK_NVX_binary_import"};
  if (g.sm_builtins) ext.insert(ext.end(), {"VK_NV_shader_sm_builtins", "VK_KHR_shader_clock"});
  VkPhysicalDeviceShaderClockFeaturesKHR clock{VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_SHADER_CLOCK_FEATURES_KHR};
  clock.shaderDeviceClock = VK_TRUE;
  VkPhysicalDeviceShaderSMBuiltinsFeaturesNV sm{VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_SHADER_SM_BUILTINS_FEATURES_NV, &clock};
  sm.shaderSMBuiltins = VK_TRUE;
  VkPhysicalDeviceVulkan12Features v12{VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_VULKAN_1_2_FEATURES,
                                       g.sm_builtins ? static_cast<void*>(&sm) : nullptr};
  v12.bufferDeviceAddress = VK_TRUE;
  VkPhysicalDeviceFeatures2 f2{VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_FEATURES_2, &v12};
  f2.features.shaderInt64 = VK_TRUE;
  const float prio = 1;
  VkDeviceQueueCreateInfo q{VK_STRUCTURE_TYPE_DEVICE_QUEUE_CREATE_INFO};
  q.queueCount = 1;
  q.pQueuePriorities = &prio;  // family 0: graphics + compute on NVIDIA
  VkDeviceCreateInfo dci{VK_STRUCTURE_TYPE_DEVICE_CREATE_INFO, &f2};
  dci.queueCreateInfoCount = 1;
  dci.pQueueCreateInfos = &q;
  dci.enabledExtensionCount = static_cast<uint32_t>(ext.size());
  dci.ppEnabledExtensionNames = ext.data();
  CHECK(vkCreateDevice(g.pd, &dci, nullptr, &g.dev));
  vkGetDeviceQueue(g.dev, 0, 0, &g.queue);
  g.create_module = reinterpret_cast<PFN_vkCreateCuModuleNVX>(vkGetDeviceProcAddr(g.dev, "vkCreateCuModuleNVX"));
  g.create_function = reinterpret_cast<PFN_vkCreateCuFunctionNVX>(vkGetDeviceProcAddr(g.dev, "vkCreateCuFunctionNVX"));
  g.launch = reinterpret_cast<PFN_vkCmdCuLaunchKernelNVX>(vkGetDeviceProcAddr(g.dev, "vkCmdCuLaunchKernelNVX"));
  VkCommandPoolCreateInfo cpi{VK_STRUCTURE_TYPE_COMMAND_POOL_CREATE_INFO};
  cpi.flags = VK_COMMAND_POOL_CREATE_RESET_COMMAND_BUFFER_BIT;
  CHECK(vkCreateCommandPool(g.dev, &cpi, nullptr, &g.pool));
  VkCommandBufferAllocateInfo cai{VK_STRUCTURE_TYPE_COMMAND_BUFFER_ALLOCATE_INFO};
  cai.commandPool = g.pool;
  cai.commandBufferCount = 1;
  CHECK(vkAllocateCommandBuffers(g.dev, &cai, &g.cb));
  VkQueryPoolCreateInfo qpi{VK_STRUCTURE_TYPE_QUERY_POOL_CREATE_INFO};
  qpi.queryType = VK_QUERY_TYPE_TIMESTAMP;
  qpi.queryCount = 2;
  CHECK(vkCreateQueryPool(g.dev, &qpi, nullptr, &g.timestamps));
  return g;
}

struct Buf {
  VkBuffer buf{};
  VkDeviceMemory mem{};
  VkDeviceAddress addr{};
  void* host = nullptr;
};

Buf make_buffer(Gpu& g, VkDeviceSize size, bool host_visible) {
  Buf b;
  VkBufferCreateInfo bci{VK_STRUCTURE_TYPE_BUFFER_CREATE_INFO};
  bci.size = size;
  bci.usage = VK_BUFFER_USAGE_STORAGE_BUFFER_BIT | VK_BUFFER_USAGE_SHADER_DEVICE_ADDRESS_BIT |
              VK_BUFFER_USAGE_TRANSFER_SRC_BIT | VK_BUFFER_USAGE_TRANSFER_DST_BIT;
  CHECK(vkCreateBuffer(g.dev, &bci, nullptr, &b.buf));
  VkMemoryRequirements mr;
  vkGetBufferMemoryRequirements(g.dev, b.buf, &mr);
  const VkMemoryPropertyFlags want = host_visible
                                         ? VK_MEMORY_PROPERTY_HOST_VISIBLE_BIT | VK_MEMORY_PROPERTY_HOST_COHERENT_BIT
                                         : VK_MEMORY_PROPERTY_DEVICE_LOCAL_BIT;
  uint32_t type = UINT32_MAX;
  for (uint32_t i = 0; i < g.mem.memoryTypeCount && type == UINT32_MAX; i++)
    if ((mr.memoryTypeBits >> i & 1) && (g.mem.memoryTypes[i].propertyFlags & want) == want) type = i;
  if (type == UINT32_MAX) fail("finding a memory type", VK_ERROR_FEATURE_NOT_PRESENT);
  VkMemoryAllocateFlagsInfo flags{VK_STRUCTURE_TYPE_MEMORY_ALLOCATE_FLAGS_INFO};
  flags.flags = VK_MEMORY_ALLOCATE_DEVICE_ADDRESS_BIT;
  VkMemoryAllocateInfo ai{VK_STRUCTURE_TYPE_MEMORY_ALLOCATE_INFO, &flags};
  ai.allocationSize = mr.size;
  ai.memoryTypeIndex = type;
  CHECK(vkAllocateMemory(g.dev, &ai, nullptr, &b.mem));
  CHECK(vkBindBufferMemory(g.dev, b.buf, b.mem, 0));
  VkBufferDeviceAddressInfo bai{VK_STRUCTURE_TYPE_BUFFER_DEVICE_ADDRESS_INFO};
  bai.buffer = b.buf;
  b.addr = vkGetBufferDeviceAddress(g.dev, &bai);
  if (host_visible) CHECK(vkMapMemory(g.dev, b.mem, 0, VK_WHOLE_SIZE, 0, &b.host));
  return b;
}

void free_buffer(Gpu& g, Buf& b) {
  vkDestroyBuffer(g.dev, b.buf, nullptr);
  vkFreeMemory(g.dev, b.mem, nullptr);
  b = Buf{};
}

VkCuFunctionNVX function(Gpu& g, VkCuModuleNVX module, const char* name) {
  VkCuFunctionCreateInfoNVX fi{VK_STRUCTURE_TYPE_CU_FUNCTION_CREATE_INFO_NVX, nullptr, module, name};
  VkCuFunctionNVX f;
  CHECK(g.create_function(g.dev, &fi, nullptr, &f));
  return f;
}

// ---- shared memory per multiprocessor: how many workgroups of a given size run at once ----

constexpr int kOccGroups = 132 * 8;  // enough to fill any current GPU several times over
constexpr unsigned kSpinNs = 200000;

// From (multiprocessor, start, end) triples: the most groups running on one multiprocessor at once.
int max_resident(const uint64_t* o, int groups) {
  int best = 0;
  for (int a = 0; a < groups; a++) {
    int c = 0;
    for (int b = 0; b < groups; b++)
      if (o[b * 3] == o[a * 3] && o[b * 3 + 1] <= o[a * 3 + 1] && o[b * 3 + 2] > o[a * 3 + 1]) c++;
    best = std::max(best, c);
  }
  return best;
}

struct ShaderProbe {
  VkDescriptorSetLayout dsl{};
  VkPipelineLayout layout{};
  VkShaderModule module{};
  VkDescriptorPool pool{};
  VkDescriptorSet set{};
};

ShaderProbe shader_probe(Gpu& g, const std::string& spv, const Buf& out) {
  ShaderProbe p;
  VkDescriptorSetLayoutBinding b{0, VK_DESCRIPTOR_TYPE_STORAGE_BUFFER, 1, VK_SHADER_STAGE_COMPUTE_BIT};
  VkDescriptorSetLayoutCreateInfo dl{VK_STRUCTURE_TYPE_DESCRIPTOR_SET_LAYOUT_CREATE_INFO};
  dl.bindingCount = 1;
  dl.pBindings = &b;
  CHECK(vkCreateDescriptorSetLayout(g.dev, &dl, nullptr, &p.dsl));
  VkPushConstantRange pr{VK_SHADER_STAGE_COMPUTE_BIT, 0, 4};
  VkPipelineLayoutCreateInfo pl{VK_STRUCTURE_TYPE_PIPELINE_LAYOUT_CREATE_INFO};
  pl.setLayoutCount = 1;
  pl.pSetLayouts = &p.dsl;
  pl.pushConstantRangeCount = 1;
  pl.pPushConstantRanges = &pr;
  CHECK(vkCreatePipelineLayout(g.dev, &pl, nullptr, &p.layout));
  VkShaderModuleCreateInfo smi{VK_STRUCTURE_TYPE_SHADER_MODULE_CREATE_INFO};
  smi.codeSize = spv.size();
  smi.pCode = reinterpret_cast<const uint32_t*>(spv.data());
  CHECK(vkCreateShaderModule(g.dev, &smi, nullptr, &p.module));
  VkDescriptorPoolSize ps{VK_DESCRIPTOR_TYPE_STORAGE_BUFFER, 1};
  VkDescriptorPoolCreateInfo dpi{VK_STRUCTURE_TYPE_DESCRIPTOR_POOL_CREATE_INFO};
  dpi.maxSets = 1;
  dpi.poolSizeCount = 1;
  dpi.pPoolSizes = &ps;
  CHECK(vkCreateDescriptorPool(g.dev, &dpi, nullptr, &p.pool));
  VkDescriptorSetAllocateInfo dsa{VK_STRUCTURE_TYPE_DESCRIPTOR_SET_ALLOCATE_INFO};
  dsa.descriptorPool = p.pool;
  dsa.descriptorSetCount = 1;
  dsa.pSetLayouts = &p.dsl;
  CHECK(vkAllocateDescriptorSets(g.dev, &dsa, &p.set));
  VkDescriptorBufferInfo dbi{out.buf, 0, VK_WHOLE_SIZE};
  VkWriteDescriptorSet wd{VK_STRUCTURE_TYPE_WRITE_DESCRIPTOR_SET};
  wd.dstSet = p.set;
  wd.descriptorCount = 1;
  wd.descriptorType = VK_DESCRIPTOR_TYPE_STORAGE_BUFFER;
  wd.pBufferInfo = &dbi;
  vkUpdateDescriptorSets(g.dev, 1, &wd, 0, nullptr);
  return p;
}

void occupancy(Gpu& g, VkCuModuleNVX module, const std::string& spv) {
  Buf out = make_buffer(g, kOccGroups * 24, true);
  auto* o = static_cast<uint64_t*>(out.host);
  const VkCuFunctionNVX kernel = function(g, module, "occupancy");
  ShaderProbe sp;
  if (g.sm_builtins) sp = shader_probe(g, spv, out);
  std::printf("\nWorkgroups of 128 invocations with S KiB of shared memory each, %d of them spinning %u us:\n"
              "the most that ran at once on one multiprocessor, and S times that\n\n",
              kOccGroups, kSpinNs / 1000);
  std::printf("| S KiB | Vulkan compute shader | x S | CUDA kernel via VK_NVX_binary_import | x S |\n"
              "| --- | --- | --- | --- | --- |\n");
  for (int kib : {4, 8, 12, 16, 20, 24, 32, 40, 47}) {
    int shader = -1, cuda = -1;
    if (g.sm_builtins) {
      const uint32_t words = kib * 256;
      VkSpecializationMapEntry me{0, 0, 4};
      VkSpecializationInfo si{1, &me, 4, &words};
      VkComputePipelineCreateInfo cp{VK_STRUCTURE_TYPE_COMPUTE_PIPELINE_CREATE_INFO};
      cp.stage = {VK_STRUCTURE_TYPE_PIPELINE_SHADER_STAGE_CREATE_INFO, nullptr, 0, VK_SHADER_STAGE_COMPUTE_BIT,
                  sp.module, "main", &si};
      cp.layout = sp.layout;
      VkPipeline pipe;
      CHECK(vkCreateComputePipelines(g.dev, VK_NULL_HANDLE, 1, &cp, nullptr, &pipe));
      std::memset(o, 0, kOccGroups * 24);
      g.begin();
      vkCmdBindPipeline(g.cb, VK_PIPELINE_BIND_POINT_COMPUTE, pipe);
      vkCmdBindDescriptorSets(g.cb, VK_PIPELINE_BIND_POINT_COMPUTE, sp.layout, 0, 1, &sp.set, 0, nullptr);
      const uint32_t spin = kSpinNs;
      vkCmdPushConstants(g.cb, sp.layout, VK_SHADER_STAGE_COMPUTE_BIT, 0, 4, &spin);
      vkCmdDispatch(g.cb, kOccGroups, 1, 1);
      g.submit_and_wait();
      shader = max_resident(o, kOccGroups);
      vkDestroyPipeline(g.dev, pipe, nullptr);
    }
    if (kib <= 47) {  // the driver keeps 1 KiB of the 48 for itself
      std::memset(o, 0, kOccGroups * 24);
      uint64_t addr = out.addr;
      unsigned spin = kSpinNs;
      const void* params[] = {&addr, &spin};
      VkCuLaunchInfoNVX li{VK_STRUCTURE_TYPE_CU_LAUNCH_INFO_NVX, nullptr, kernel, kOccGroups, 1, 1, 128, 1, 1,
                           static_cast<uint32_t>(kib * 1024), 2, params, 0, nullptr};
      g.begin();
      g.launch(g.cb, &li);
      g.submit_and_wait();
      cuda = max_resident(o, kOccGroups);
    }
    auto cell = [&](int n) { return n < 0 ? std::string("-") : std::to_string(n); };
    auto times = [&](int n) { return n < 0 ? std::string("-") : std::to_string(n * kib) + " KiB"; };
    std::printf("| %d | %s | %s | %s | %s |\n", kib, cell(shader).c_str(), times(shader).c_str(), cell(cuda).c_str(),
                times(cuda).c_str());
  }
  if (!g.sm_builtins) std::printf("(no VK_NV_shader_sm_builtins / VK_KHR_shader_clock: shader column skipped)\n");
  free_buffer(g, out);
}

// ---- the GEMMs ----

struct Kernel {
  const char* name;
  int threads, bm, bn;
  uint32_t shared;  // bytes of dynamic shared memory
  const char* what;
};
const Kernel kKernels[] = {
    {"mma_128x128x32_s2", 256, 128, 128, 2 * 256 * 32 * 2, "mma.sync + ldmatrix, cp.async, 2 stages of K 32"},
    {"wgmma_ss_128x128x32_s2", 256, 128, 128, 2 * 256 * 32 * 2, "wgmma, both from shared, 2 stages of K 32"},
    {"wgmma_ss_128x256x16_s3", 256, 128, 256, 3 * 384 * 16 * 2, "wgmma, both from shared, 3 stages of K 16"},
    {"wgmma_rs_128x256_s4d4", 256, 128, 256, 4 * 256 * 16 * 2, "wgmma, x in registers 4 ahead, W 4 stages"},
    {"wgmma_rs_128x256_s5d8", 256, 128, 256, 5 * 256 * 16 * 2, "wgmma, x in registers 8 ahead, W 5 stages"},
    {"wgmma_ws_128x256_s3", 384, 128, 256, 3 * 384 * 16 * 2 + 48, "wgmma, producer warpgroup + mbarriers, 3 stages"},
    {"direct_64x128", 256, 64, 128, 0, "mma.sync on fragments loaded from global (L1), no shared"},
    {"loads_128x256", 256, 128, 256, 0, "the 128 x 256 tile's loads alone, no math"},
};

struct Shape {
  int M, K, N;
};

double time_launches(Gpu& g, const VkCuLaunchInfoNVX& li, int reps) {
  double best = 1e30, spent = 0;
  const auto start = std::chrono::steady_clock::now();
  // 300 ms at load first (clocks climb), then at least a second of passes: the fastest counts.
  while (spent < 1.3) {
    g.begin();
    vkCmdResetQueryPool(g.cb, g.timestamps, 0, 2);
    vkCmdWriteTimestamp(g.cb, VK_PIPELINE_STAGE_TOP_OF_PIPE_BIT, g.timestamps, 0);
    for (int i = 0; i < reps; i++) g.launch(g.cb, &li);
    vkCmdWriteTimestamp(g.cb, VK_PIPELINE_STAGE_BOTTOM_OF_PIPE_BIT, g.timestamps, 1);
    g.submit_and_wait();
    uint64_t ts[2];
    CHECK(vkGetQueryPoolResults(g.dev, g.timestamps, 0, 2, sizeof ts, ts, 8,
                                VK_QUERY_RESULT_64_BIT | VK_QUERY_RESULT_WAIT_BIT));
    spent = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
    if (spent > 0.3) best = std::min(best, (ts[1] - ts[0]) * g.props.limits.timestampPeriod * 1e-9 / reps);
  }
  return best;
}

void gemms(Gpu& g, VkCuModuleNVX module, int reps) {
  const Shape shapes[] = {{512, 2048, 8192}, {4096, 4096, 4096}, {509, 2040, 8190}};
  std::printf("\nf16 GEMMs y = x W^T (f32 sums), CUDA kernels launched from Vulkan command buffers; each checked\n"
              "at 4,000 entries (corners included) against float64 sums; time is the fastest pass of %d\n"
              "launches after 300 ms of warm-up\n\n",
              reps);
  std::printf("| kernel | structure | shared KiB | M x K x N | check | ms | TFLOP/s |\n"
              "| --- | --- | --- | --- | --- | --- | --- |\n");
  for (const Shape& s : shapes) {
    const size_t xs = size_t(s.M) * s.K, ws = size_t(s.N) * s.K, ys = size_t(s.M) * s.N;
    Buf x = make_buffer(g, xs * 2, false), w = make_buffer(g, ws * 2, false), y = make_buffer(g, ys * 4, false);
    Buf staging = make_buffer(g, std::max(xs * 2 + ws * 2, ys * 4), true);
    auto* hx = static_cast<uint16_t*>(staging.host);
    uint16_t* hw = hx + xs;
    std::mt19937 rng(s.M * 31 + s.N);
    std::uniform_real_distribution<float> u(-1, 1);
    for (size_t i = 0; i < xs; i++) hx[i] = to_half(u(rng));
    for (size_t i = 0; i < ws; i++) hw[i] = to_half(u(rng));
    const std::vector<uint16_t> cx(hx, hx + xs), cw(hw, hw + ws);
    g.begin();
    const VkBufferCopy cpx{0, 0, xs * 2}, cpw{xs * 2, 0, ws * 2};
    vkCmdCopyBuffer(g.cb, staging.buf, x.buf, 1, &cpx);
    vkCmdCopyBuffer(g.cb, staging.buf, w.buf, 1, &cpw);
    g.submit_and_wait();
    const bool timed = s.M % 8 == 0;  // the odd shape is a correctness check only
    for (const Kernel& k : kKernels) {
      const bool loads_only = !std::strncmp(k.name, "loads", 5);
      if (loads_only && !timed) continue;
      const VkCuFunctionNVX f = function(g, module, k.name);
      uint64_t ya = y.addr, xa = x.addr, wa = w.addr;
      int M = s.M, N = s.N, K = s.K, lda = s.K, ldw = s.K, ldy = s.N;
      const void* params[] = {&ya, &xa, &wa, &M, &N, &K, &lda, &ldw, &ldy};
      const VkCuLaunchInfoNVX li{VK_STRUCTURE_TYPE_CU_LAUNCH_INFO_NVX,
                                 nullptr,
                                 f,
                                 static_cast<uint32_t>((N + k.bn - 1) / k.bn),
                                 static_cast<uint32_t>((M + k.bm - 1) / k.bm),
                                 1,
                                 static_cast<uint32_t>(k.threads),
                                 1,
                                 1,
                                 k.shared,
                                 9,
                                 params,
                                 0,
                                 nullptr};
      std::string check = "-";
      if (!loads_only) {
        g.begin();
        vkCmdFillBuffer(g.cb, y.buf, 0, VK_WHOLE_SIZE, 0x7fc00000u);  // NaN: unwritten entries fail
        g.barrier();
        g.launch(g.cb, &li);
        g.barrier();
        const VkBufferCopy back{0, 0, ys * 4};
        vkCmdCopyBuffer(g.cb, y.buf, staging.buf, 1, &back);
        g.submit_and_wait();
        const auto* hy = static_cast<const float*>(staging.host);
        std::mt19937 pick(7);
        int bad = 0;
        for (int i = 0; i < 4000; i++) {
          const int m = i < 4 ? (i & 1 ? s.M - 1 : 0) : int(pick() % s.M);
          const int n = i < 4 ? (i & 2 ? s.N - 1 : 0) : int(pick() % s.N);
          double ref = 0, mag = 0;
          for (int kk = 0; kk < s.K; kk++) {
            const double p = from_half(cx[size_t(m) * s.K + kk]) * from_half(cw[size_t(n) * s.K + kk]);
            ref += p;
            mag += std::fabs(p);
          }
          if (!(std::fabs(hy[size_t(m) * s.N + n] - ref) <= 1e-5 * mag + 1e-6)) bad++;
        }
        check = bad ? std::to_string(bad) + " of 4000 wrong" : "ok";
      }
      std::string ms = "-", rate = "-";
      if (timed) {
        const double t = time_launches(g, li, std::max(1, reps * 512 / std::max(512, s.M)));
        char buf[64];
        std::snprintf(buf, sizeof buf, "%.4f", t * 1e3);
        ms = buf;
        const double tiles = double((N + k.bn - 1) / k.bn) * ((M + k.bm - 1) / k.bm);
        if (loads_only) std::snprintf(buf, sizeof buf, "%.1f TB/s of loads", tiles * (k.bm + k.bn) * K * 2.0 / t * 1e-12);
        else std::snprintf(buf, sizeof buf, "%.1f", 2.0 * M * N * K / t * 1e-12);
        rate = buf;
      }
      std::printf("| %s | %s | %.1f | %d x %d x %d | %s | %s | %s |\n", k.name, k.what, k.shared / 1024.0, s.M, s.K,
                  s.N, check.c_str(), ms.c_str(), rate.c_str());
      std::fflush(stdout);
    }
    free_buffer(g, x);
    free_buffer(g, w);
    free_buffer(g, y);
    free_buffer(g, staging);
  }
}

}  // namespace

int main(int argc, char** argv) {
  if (argc < 3) {
    std::fprintf(stderr, "usage: nvx_probe KERNELS.cubin OCCUPANCY.spv [--reps N]\n");
    return 2;
  }
  int reps = 100;
  for (int i = 3; i + 1 < argc; i++)
    if (!std::strcmp(argv[i], "--reps")) reps = std::max(1, std::atoi(argv[i + 1]));
  const std::string cubin = slurp(argv[1]), spv = slurp(argv[2]);
  Gpu g = open_gpu();
  std::printf("%s, Vulkan %u.%u.%u, maxComputeSharedMemorySize %u bytes\n", g.props.deviceName,
              VK_API_VERSION_MAJOR(g.props.apiVersion), VK_API_VERSION_MINOR(g.props.apiVersion),
              VK_API_VERSION_PATCH(g.props.apiVersion), g.props.limits.maxComputeSharedMemorySize);
  VkCuModuleCreateInfoNVX mi{VK_STRUCTURE_TYPE_CU_MODULE_CREATE_INFO_NVX, nullptr, cubin.size(), cubin.data()};
  VkCuModuleNVX module;
  CHECK(g.create_module(g.dev, &mi, nullptr, &module));
  occupancy(g, module, spv);
  gemms(g, module, reps);
  return 0;
}
