// vrun export: a checkpoint -> program file (.vrp). Llama-family checkpoints (GGUF file or Hugging
// Face folder) and Whisper checkpoints (CTranslate2, Hugging Face, whisper.cpp ggml), optionally
// with the large matrices converted to another type; NeMo Parakeet (.nemo or Hugging Face).
#include <cstdio>
#include <optional>

#include "apps/cli/command.h"
#include "models/llama/hf_llama.h"
#include "models/onnx/onnx_import.h"
#if VRUN_WHISPER
#include "models/whisper/whisper_convert.h"
#include "models/whisper/whisper_import.h"
#endif
#if VRUN_PARAKEET
#include "apps/parakeet/parakeet_runner.h"
#endif

namespace vrun::cli {
namespace {

struct ExportArgs {
  std::string model, out, dtype;
  int64_t ctx = 0, chunk = 512;
  int64_t local_window = -1;  // Parakeet: encode_local's window; -1: the builder's default
};

// Speech models: the program `vrun transcribe` builds on load (Whisper's matrices converted to
// --dtype when given), written once.
// nullopt: the checkpoint is not a speech model.
std::optional<int> export_speech(const ExportArgs& a) {
  std::shared_ptr<Program> program;
  std::vector<std::string> notes;
#if VRUN_WHISPER
  if (whisper::is_whisper_checkpoint(a.model)) {
    if (a.ctx != 0) return fail("export", "--ctx applies to Llama-family models; Whisper's text context is fixed by the model");
    if (a.local_window >= 0) return fail("export", "--local-window applies to Parakeet models");
    std::optional<DType> dtype;
    if (!a.dtype.empty()) {
      dtype = dtype_from_name(a.dtype);
      if (!dtype || (*dtype != DType::f32 && *dtype != DType::f16 && *dtype != DType::bf16 && *dtype != DType::q8_0))
        return fail("export", "--dtype '" + a.dtype + "' for a Whisper model: choose f32, f16, bf16 or q8_0");
    }
    auto p = whisper::export_whisper_program(a.model, dtype, &notes);
    if (!p.is_ok()) return fail("export", p.status().to_string());
    program = *p;
  }
#endif
#if VRUN_PARAKEET
  if (!program && parakeet::is_parakeet_checkpoint(a.model)) {
    if (a.ctx != 0) return fail("export", "--ctx applies to Llama-family models; Parakeet encodes audio in chunks of any length");
    parakeet::BuildSettings bs;
    if (!a.dtype.empty()) {
      const auto dtype = dtype_from_name(a.dtype);
      if (!dtype || (*dtype != DType::f32 && *dtype != DType::f16 && *dtype != DType::bf16))
        return fail("export", "--dtype '" + a.dtype + "' for a Parakeet model: choose f32, f16 or bf16 (its linear weights)");
      bs.weight_dtype = *dtype;
    }
    if (a.local_window >= 0) bs.local_window = a.local_window;
    auto p = parakeet::export_parakeet(a.model, bs);
    if (!p.is_ok()) return fail("export", p.status().to_string());
    program = *p;
  }
#endif
  if (!program) return std::nullopt;
  for (const auto& n : notes) std::fprintf(stderr, "vrun: %s\n", n.c_str());
  const Status s = write_program(*program, a.out);
  if (!s.is_ok()) return fail("export", s.with_context("writing " + a.out).to_string());
  std::fprintf(stderr, "wrote %s\n", a.out.c_str());
  return 0;
}

int run_export(const ExportArgs& a) {
  if (onnx::is_onnx_path(a.model)) {
    auto p = onnx::import_onnx(a.model);
    if (!p.is_ok()) return fail("export", p.status().to_string());
    const Status s = write_program(**p, a.out);
    if (!s.is_ok()) return fail("export", s.with_context("writing " + a.out).to_string());
    std::fprintf(stderr, "wrote %s\n", a.out.c_str());
    return 0;
  }
  if (auto r = export_speech(a)) return *r;
  if (a.local_window >= 0) return fail("export", "--local-window applies to Parakeet models");
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
                     "Imports a checkpoint and writes its program (.vrp): weights, graph, tokenizer and settings in one "
                     "file that `vrun generate -m` (Llama family: .gguf or Hugging Face folder) or `vrun transcribe -m` "
                     "(Whisper: CTranslate2 / Hugging Face folder or whisper.cpp ggml file; Parakeet: .nemo or Hugging "
                     "Face folder) loads.",
                     [](CLI::App& sub) {
                       auto a = std::make_shared<ExportArgs>();
                       sub.add_option("-m,--model", a->model, "Checkpoint: .gguf file, Hugging Face folder, CTranslate2 folder, "
                                                                    "whisper.cpp ggml file or .nemo archive")->required();
                       sub.add_option("-o,--output", a->out, "Program file to write (.vrp)")->required();
                       sub.add_option("--dtype", a->dtype,
                                      "Type of the large matrices (default: as in the checkpoint). Llama family: the "
                                      "attention, feed-forward and output projections, f32, f16, bf16, q8_0 or q4_0. "
                                      "Whisper: every linear weight and the token embedding (also the vocabulary "
                                      "projection), f32, f16, bf16 or q8_0");
                       sub.add_option("--ctx", a->ctx, "KV-cache length fixed in the program (0: the model's maximum)")
                           ->capture_default_str();
                       sub.add_option("--chunk", a->chunk, "Most tokens per prefill call")->capture_default_str();
                       sub.add_option("--local-window", a->local_window,
                                      "Parakeet: frames (80 ms each) on either side that `transcribe --attention local` "
                                      "attends to (default 128, NeMo's long-audio setting; 0: no local-attention method)")
                           ->check(CLI::Range(int64_t{0}, int64_t{100000}));
                       return [a] { return run_export(*a); };
                     });

}  // namespace
}  // namespace vrun::cli
