#include "apps/cli/model_options.h"

#include <cstdlib>

#include "apps/cli/command.h"
#include "runtime/backend.h"
#include "runtime/base/strings.h"

namespace vrun::cli {

void add_backend_options(CLI::App& sub, BackendArgs& a) {
  sub.add_option("--backend", a.backend, "cpu, vulkan or auto")->check(CLI::IsMember({"cpu", "vulkan", "auto"}))->capture_default_str();
  sub.add_option("-t,--threads", a.threads, "CPU threads (0: VRUN_THREADS or all cores)")
      ->check(CLI::Range(0, 4096))
      ->capture_default_str();
}

std::unique_ptr<llama::LlamaRunner> load_llama_runner(const std::string& command, const std::string& model,
                                                      const BackendArgs& b, const llama::LoadOptions& options) {
  auto backend = parse_backend_kind(b.backend);
  if (!backend.is_ok()) {
    fail(command, backend.status().message());
    return nullptr;
  }
  llama::LoadOptions lo = options;
  lo.backend = *backend;
  lo.threads = b.threads;
  auto runner = llama::LlamaRunner::load(model, lo);
  if (!runner.is_ok()) {
    fail(command, runner.status().to_string());
    return nullptr;
  }
  return std::move(*runner);
}

Result<std::vector<int>> parse_device_list(const std::string& option, const std::string& value) {
  const BackendEntry* vulkan = find_backend("vulkan");
  if (!vulkan || !vulkan->device_count) return err(ErrorCode::kUnsupported, option, ": this vrun is built without the Vulkan backend");
  const int count = vulkan->device_count();
  std::vector<int> devices;
  if (value == "all") {
    if (count == 0) return err(ErrorCode::kNotFound, option, " all: no Vulkan device found");
    for (int d = 0; d < count; ++d) devices.push_back(d);
    return devices;
  }
  for (const auto& item : split(value, ',')) {
    char* end = nullptr;
    const long d = std::strtol(item.c_str(), &end, 10);
    if (item.empty() || *end != '\0' || d < 0)
      return err(ErrorCode::kInvalidArgument, option, " must be all or device indices like 0,1, got '", value, "'");
    if (d >= count)
      return err(ErrorCode::kInvalidArgument, option, " ", value, ": device ", d, " does not exist (", count,
                 " Vulkan devices; vrun info lists them)");
    devices.push_back(static_cast<int>(d));
  }
  return devices;
}

}  // namespace vrun::cli
