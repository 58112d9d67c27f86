#include "apps/cli/model_options.h"

#include "apps/cli/command.h"

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

}  // namespace vrun::cli
