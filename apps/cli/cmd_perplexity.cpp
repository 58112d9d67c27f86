// vrun perplexity: how well a model predicts a text; checks quantisations and kernels.
#include <cstdio>
#include <fstream>
#include <sstream>

#include "apps/cli/command.h"
#include "apps/cli/model_options.h"
#include "apps/llama/llama_runner.h"

namespace vrun::cli {
namespace {

struct PerplexityArgs {
  std::string model, file;
  int64_t ctx = 512;
  BackendArgs run;
};

int run_perplexity(const PerplexityArgs& a) {
  std::ifstream f(a.file, std::ios::binary);
  if (!f) return fail("perplexity", "cannot read " + a.file);
  std::stringstream ss;
  ss << f.rdbuf();
  const std::string text = ss.str();
  if (text.empty()) return fail("perplexity", a.file + " is empty");
  llama::LoadOptions lo;
  lo.context = a.ctx;
  lo.chunk = a.ctx;
  auto runner = load_llama_runner("perplexity", a.model, a.run, lo);
  if (!runner) return 1;
  tok::EncodeOptions eo;
  eo.allow_special = false;
  eo.add_bos = false;
  const std::vector<int32_t> toks = runner->tokenizer().encode(text, eo);
  // BOS opens every chunk only when the model's metadata asks for it.
  std::vector<int32_t> stream;
  const int32_t bos = runner->tokenizer().special_ids().bos;
  const bool add_bos = runner->add_bos() && bos >= 0;
  const int64_t body = add_bos ? a.ctx - 1 : a.ctx;
  if (body < 1) return fail("perplexity", "--ctx too small");
  for (size_t at = 0; at + static_cast<size_t>(body) <= toks.size(); at += static_cast<size_t>(body)) {
    if (add_bos) stream.push_back(bos);
    stream.insert(stream.end(), toks.begin() + static_cast<std::ptrdiff_t>(at), toks.begin() + static_cast<std::ptrdiff_t>(at + body));
  }
  std::fprintf(stderr, "perplexity: %zu tokens, %lld-token chunks%s\n", toks.size(), static_cast<long long>(a.ctx),
               add_bos ? " (BOS first)" : "");
  if (stream.empty())
    return fail("perplexity", "the text has " + std::to_string(toks.size()) + " tokens, fewer than one " +
                                  std::to_string(a.ctx) + "-token chunk");
  auto r = runner->perplexity(stream, a.ctx, [](int c, int n, double ppl) {
    std::fprintf(stderr, "[%d/%d] %.4f\n", c, n, ppl);
  });
  if (!r.is_ok()) return fail("perplexity", r.status().to_string());
  std::fprintf(stderr, "%lld tokens scored in %d chunks; top-1 accuracy %.2f%%\n", static_cast<long long>(r->scored_tokens),
               r->chunks, 100.0 * static_cast<double>(r->top1_matches) / static_cast<double>(r->scored_tokens));
  std::printf("perplexity %.4f\n", r->perplexity);
  return 0;
}

CommandRegistrar reg("perplexity",
                     "Perplexity of a model on a text: the text is cut into full, non-overlapping chunks of --ctx "
                     "tokens (a last partial chunk is not scored); every token of a chunk after its first is scored. "
                     "Prints the running value per chunk on stderr and the final one on the last line of stdout.",
                     [](CLI::App& sub) {
                       auto a = std::make_shared<PerplexityArgs>();
                       sub.add_option("-m,--model", a->model, "Model: .gguf or .vrp")->required();
                       sub.add_option("-f,--file", a->file, "Text file")->required();
                       sub.add_option("--ctx", a->ctx, "Tokens per chunk")->capture_default_str();
                       add_backend_options(sub, a->run);
                       return [a] { return run_perplexity(*a); };
                     });

}  // namespace
}  // namespace vrun::cli
