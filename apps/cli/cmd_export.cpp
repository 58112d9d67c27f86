// vrun export: a Llama-family checkpoint (GGUF file or Hugging Face folder) -> program file (.vrp),
// optionally with the projection weights converted to another type.
#include <cstdio>

#include "apps/cli/command.h"
#include "models/llama/hf_llama.h"

namespace vrun::cli {
namespace {

struct ExportArgs {
  std::string model, out, dtype;
  int64_t ctx = 0, chunk = 512;
};

int run_export(const ExportArgs& a) {
  llama::ExportOptions o;
  if (!a.dtype.empty()) {
    const auto t = dtype_from_name(a.dtype);
    if (!t || (*t != DType::f32 && *t != DType::f16 && *t != DType::bf16 && *t != DType::q8_0 && *t != DType::q4_0))
      return fail("export", "--dtype '" + a.dtype + "': choose f32, f16, bf16, q8_0 or q4_0");
    o.dtype = *t;
  }
  if (a.ctx < 0) return fail("export", "--ctx must be positive (or 0 for the model's maximum), got " + std::to_string(a.ctx));
  if (a.chunk <= 0) return fail("export", "--chunk must be positive, got " + std::to_string(a.chunk));
  o.context = a.ctx;
  o.chunk = a.chunk;
  std::vector<std::string> notes;
  const Status s = llama::export_llama_program(a.model, a.out, o, &notes);
  for (const auto& n : notes) std::fprintf(stderr, "vrun: %s\n", n.c_str());
  if (!s.is_ok()) return fail("export", s.to_string());
  std::fprintf(stderr, "wrote %s\n", a.out.c_str());
  return 0;
}

CommandRegistrar reg("export",
                     "Imports a Llama-family checkpoint (.gguf file or Hugging Face folder) and writes its program "
                     "(.vrp): weights, graph, tokenizer and chat template in one file that `vrun generate -m` loads.",
                     [](CLI::App& sub) {
                       auto a = std::make_shared<ExportArgs>();
                       sub.add_option("-m,--model", a->model, "Checkpoint: .gguf file or Hugging Face folder")->required();
                       sub.add_option("-o,--output", a->out, "Program file to write (.vrp)")->required();
                       sub.add_option("--dtype", a->dtype,
                                      "Type of the attention, feed-forward and output projections: f32, f16, bf16, q8_0 or q4_0 "
                                      "(default: as in the checkpoint)");
                       sub.add_option("--ctx", a->ctx, "KV-cache length fixed in the program (0: the model's maximum)")
                           ->capture_default_str();
                       sub.add_option("--chunk", a->chunk, "Most tokens per prefill call")->capture_default_str();
                       return [a] { return run_export(*a); };
                     });

}  // namespace
}  // namespace vrun::cli
