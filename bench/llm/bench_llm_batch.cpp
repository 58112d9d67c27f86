// Aggregate decode throughput of continuous batching: N concurrent greedy streams in one
// BatchSession against single-stream LlamaRunner::generate, same model, same run.
//
//   bench_llm_batch MODEL [--backend cpu|vulkan|auto] [--streams 1,4,8,16] [--tokens 64]
//                         [--threads 0] [--min-rows 0] [--ctx 512]
//
// --ctx: the KV positions of each slot and of the single-stream cache (`vrun serve` gives a slot
// 4,096 by default; attention's work on a GPU is planned for the capacity, so it can matter).
// Every stream decodes --tokens tokens (EOS ignored); prefill is not timed. The decode rate of N
// streams is the tokens they produce in the steps where all N decode, over those steps' time.
// Every stream has the same prompt at temperature 0: each row also says how many streams' tokens
// equal generate's (all of them, where batching keeps the single-stream result).
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>
#include <vector>

#include "apps/llama/batch_session.h"

using namespace vrun;
using namespace vrun::llama;

namespace {

std::vector<int64_t> parse_list(const std::string& s) {
  std::vector<int64_t> out;
  size_t at = 0;
  while (at < s.size()) {
    size_t end = s.find(',', at);
    if (end == std::string::npos) end = s.size();
    out.push_back(std::atoll(s.substr(at, end - at).c_str()));
    at = end + 1;
  }
  return out;
}

double now_s() { return std::chrono::duration<double>(std::chrono::steady_clock::now().time_since_epoch()).count(); }

}  // namespace

int main(int argc, char** argv) {
  if (argc < 2 || !std::strcmp(argv[1], "--help")) {
    std::fprintf(stderr, "usage: bench_llm_batch MODEL [--backend cpu|vulkan|auto] [--streams 1,4,8,16] [--tokens 64] "
                         "[--threads 0] [--min-rows 0] [--ctx 512]\n");
    return 2;
  }
  std::string model = argv[1], backend = "cpu";
  std::vector<int64_t> streams = {1, 4, 8, 16};
  int tokens = 64, threads = 0;
  int64_t min_rows = 0, ctx = 512;
  for (int i = 2; i + 1 < argc; i += 2) {
    const std::string k = argv[i], v = argv[i + 1];
    if (k == "--backend") backend = v;
    else if (k == "--streams") streams = parse_list(v);
    else if (k == "--tokens") tokens = std::atoi(v.c_str());
    else if (k == "--threads") threads = std::atoi(v.c_str());
    else if (k == "--min-rows") min_rows = std::atoll(v.c_str());
    else if (k == "--ctx") ctx = std::atoll(v.c_str());
    else {
      std::fprintf(stderr, "bench_llm_batch: unknown option %s\n", k.c_str());
      return 2;
    }
  }
  int64_t most = 1;
  for (int64_t n : streams) most = std::max(most, n);
  LoadOptions lo;
  lo.backend = backend == "vulkan" ? BackendKind::kVulkan : backend == "auto" ? BackendKind::kAuto : BackendKind::kCpu;
  lo.threads = threads;
  if (ctx < 64) {
    std::fprintf(stderr, "bench_llm_batch: --ctx %lld: at least 64 positions\n", static_cast<long long>(ctx));
    return 2;
  }
  lo.context = ctx;
  lo.batch_slots = std::max(most, min_rows);
  lo.batch_context = ctx;
  auto loaded = LlamaRunner::load(model, lo);
  if (!loaded.is_ok()) {
    std::fprintf(stderr, "bench_llm_batch: %s\n", loaded.status().message().c_str());
    return 1;
  }
  LlamaRunner& r = **loaded;
  const std::string chat = "<|im_start|>user\nTell me a long story about a lighthouse keeper.<|im_end|>\n<|im_start|>assistant\n";
  const std::vector<int32_t> prompt = r.tokenizer().encode(chat);
  GenerateOptions o;
  o.max_tokens = tokens;
  o.ignore_eos = true;
  o.sampling.temperature = 0;
  auto quiet = [](const std::string&) { return true; };
  // Single stream, generate (warm-up first).
  double single = 0;
  std::vector<int32_t> alone;  // generate's tokens: every stream's greedy tokens should be these
  for (int rep = 0; rep < 2; ++rep) {
    r.reset();
    auto st = r.generate(prompt, o, quiet);
    if (!st.is_ok()) {
      std::fprintf(stderr, "bench_llm_batch: %s\n", st.status().message().c_str());
      return 1;
    }
    single = st->decode_tok_s();
    alone = st->tokens;
  }
  r.reset();
  std::printf("model %s, backend %s, %d tokens a stream, prompt %zu tokens\n", model.c_str(), backend.c_str(), tokens,
              prompt.size());
  std::printf("%-28s %10.1f tok/s\n", "generate, 1 stream", single);
  BatchOptions bo;
  bo.min_rows = min_rows;
  for (int64_t n : streams) {
    auto made = BatchSession::create(r, bo);
    if (!made.is_ok()) {
      std::fprintf(stderr, "bench_llm_batch: %s\n", made.status().message().c_str());
      return 1;
    }
    BatchSession& b = **made;
    // Every batch size's pipelines and recordings built first, as `vrun serve` does at load: the
    // timed steps are not a fresh process's first use of them.
    if (auto w = b.warm_up(); !w.is_ok()) {
      std::fprintf(stderr, "bench_llm_batch: %s\n", w.status().message().c_str());
      return 1;
    }
    // A GPU idle through the pipelines' creation drops its clocks and takes a fraction of a
    // second of work to raise them (an H200: 345 MHz, and the first timed steps of a fresh
    // process at half speed): the same calls again for 0.5 s first.
    if (r.uses_gpu())
      for (const double t = now_s(); now_s() - t < 0.5;)
        if (auto w = b.warm_up(); !w.is_ok()) {
          std::fprintf(stderr, "bench_llm_batch: %s\n", w.status().message().c_str());
          return 1;
        }
    for (int64_t i = 0; i < n; ++i)
      if (auto id = b.add(prompt, o, quiet); !id.is_ok()) {
        std::fprintf(stderr, "bench_llm_batch: %s\n", id.status().message().c_str());
        return 1;
      }
    // Prefill everyone (one chunk a step, the others decoding meanwhile) until a step decodes a
    // token for every stream, then time the steps where all n decode.
    while (b.running() == n && b.last_batch() < n) {
      if (Status s = b.step(); !s.is_ok()) {
        std::fprintf(stderr, "bench_llm_batch: %s\n", s.message().c_str());
        return 1;
      }
    }
    const double t0 = now_s(), call0 = b.decode_call_seconds(), sample0 = b.sample_seconds();
    int64_t produced = 0, timed_steps = 0;
    while (b.running() == n) {
      if (Status s = b.step(); !s.is_ok()) {
        std::fprintf(stderr, "bench_llm_batch: %s\n", s.message().c_str());
        return 1;
      }
      if (b.running() == n) produced += n;  // the last step ends the streams (length) without a token
      ++timed_steps;
    }
    const double dt = now_s() - t0, call_s = b.decode_call_seconds() - call0, sample_s = b.sample_seconds() - sample0;
    int64_t same = 0;
    for (;;) {
      for (const BatchFinished& f : b.take_finished()) same += f.stats.tokens == alone ? 1 : 0;
      if (b.idle()) break;
      if (!b.step().is_ok()) return 1;
    }
    char label[64];
    std::snprintf(label, sizeof label, "batch, %lld stream%s (B=%lld)", static_cast<long long>(n), n > 1 ? "s" : "",
                  static_cast<long long>(b.last_rows()));
    std::printf("%-28s %10.1f tok/s aggregate, %6.1f tok/s a stream, %lld steps; %lld of %lld streams' tokens as generate's\n",
                label, dt > 0 ? produced / dt : 0.0, dt > 0 ? produced / dt / n : 0.0, static_cast<long long>(timed_steps),
                static_cast<long long>(same), static_cast<long long>(n));
    if (timed_steps > 0)
      std::printf("  a step: %.3f ms, of which %.3f in the decode call and %.3f sampling its rows\n", 1e3 * dt / timed_steps,
                  1e3 * call_s / timed_steps, 1e3 * sample_s / timed_steps);
    if (produced == 0)
      std::printf("  (no step decoded all %lld streams: the first ended before the last was prefilled; raise --tokens)\n",
                  static_cast<long long>(n));
  }
  return 0;
}
