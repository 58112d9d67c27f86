// vrun export: a checkpoint -> program file (.vrp). Llama-family checkpoints (GGUF file or Hugging
// Face folder) and Whisper checkpoints (CTranslate2, Hugging Face, whisper.cpp ggml), optionally
// with the large matrices converted to another type; NeMo Parakeet (.nemo or Hugging Face).
#include <cstdio>
#include <optional>

#include "apps/cli/command.h"
#include "models/registry/families.h"
#include "runtime/program.h"

namespace vrun::cli {
namespace {

struct ExportArgs {
  std::string model, out, dtype;
  int64_t ctx = 0, chunk = 512;
  int64_t local_window = -1;  // Parakeet: encode_local's window; -1: the builder's default
  int64_t long_frames = -1;   // Parakeet: encode_long's frames; -1: the builder's default
  int64_t batch_size = 0;     // Whisper: streams; Parakeet: max_batch (0: its default)
};

int run_export(const ExportArgs& a) {
  models::BuildOptions o;
  if (!a.dtype.empty()) {
    o.dtype = dtype_from_name(a.dtype);
    if (!o.dtype) return fail("export", "--dtype '" + a.dtype + "': not a type vrun knows (f32, f16, bf16, q8_0, q4_0)");
  }
  o.context = a.ctx;
  o.chunk = a.chunk;
  o.local_window = a.local_window;
  o.long_frames = a.long_frames;
  o.streams = a.batch_size;
  // The family decides which options apply, before anything is imported (models::export_program).
  std::vector<std::string> notes;
  auto family = models::export_program(a.model, a.out, o, &notes);
  for (const auto& n : notes) std::fprintf(stderr, "vrun: %s\n", n.c_str());
  if (!family.is_ok()) return fail("export", family.status().to_string());
  std::fprintf(stderr, "wrote %s (%s model)\n", a.out.c_str(), (*family)->name.c_str());
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
                       sub.add_option("--long-frames", a->long_frames,
                                      "Parakeet: encoder frames (80 ms each) that full attention takes in one call for a "
                                      "file longer than 160 s, when the device has the memory free for it (default 7500, "
                                      "ten minutes: about 4 GB of scratch for the 0.6B model; longer files, or too little "
                                      "memory, go in overlapping chunks; 0: always chunks)")
                           ->check(CLI::Range(int64_t{0}, int64_t{100000}));
                       sub.add_option("--batch-size", a->batch_size,
                                      "Whisper: files `vrun transcribe --batch-size` (and `vrun serve` on a GPU) may decode "
                                      "together with this program (its stream methods; 0 or 1: none, files one after "
                                      "another). Parakeet: 160-s jobs one batched encoder call takes (0: 4; 1: no batched "
                                      "methods); shorter jobs go twice as many at half the length, up to 64 (e.g. 4 x 160 s, "
                                      "8 x 80 s, ..., 64 x 10 s), all in one scratch arena of about N x 1 GiB for the "
                                      "0.6B model. On NVIDIA's Vulkan driver at most 8 (one tensor of a call must stay "
                                      "under 4 GiB)")
                           ->check(CLI::Range(int64_t{0}, int64_t{64}))
                           ->capture_default_str();
                       return [a] { return run_export(*a); };
                     });

}  // namespace
}  // namespace vrun::cli
