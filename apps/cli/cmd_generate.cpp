// vrun generate: text generation with a Llama-family model (.gguf or .vrp).
#include <cstdio>
#include <iostream>
#include <nlohmann/json.hpp>

#include "apps/cli/command.h"
#include "apps/cli/model_options.h"
#include "apps/common/tokenizer/chat_template.h"
#include "apps/llama/llama_runner.h"

namespace vrun::cli {
namespace {

struct GenerateArgs {
  std::string model, prompt, system, chat_format = "auto";
  int max_tokens = 256;
  BackendArgs run;
  int64_t ctx = 0;
  bool interactive = false, json = false, raw = false, truncate = false, ignore_eos = false, quiet = false;
  std::vector<std::string> stop;
  SamplingOptions sampling;
};

void print_stats(const llama::GenerateStats& st) {
  std::fprintf(stderr,
               "\nprompt %d tokens, generated %d tokens (%s); time to first token %.3f s; prefill %.1f tok/s; "
               "decode %.1f tok/s; peak memory %.1f MiB\n",
               st.prompt_tokens, st.generated_tokens, st.stop_reason.c_str(), st.time_to_first_token_s, st.prefill_tok_s(),
               st.decode_tok_s(), static_cast<double>(llama::peak_rss_bytes()) / (1 << 20));
}

nlohmann::json stats_json(const llama::GenerateStats& st) {
  return {{"prompt_tokens", st.prompt_tokens},       {"generated_tokens", st.generated_tokens},
          {"stop_reason", st.stop_reason},           {"time_to_first_token_s", st.time_to_first_token_s},
          {"prefill_tokens_per_s", st.prefill_tok_s()}, {"decode_tokens_per_s", st.decode_tok_s()},
          {"peak_memory_bytes", llama::peak_rss_bytes()}};
}

int run_generate(GenerateArgs a) {
  if (a.max_tokens < -1) return fail("generate", "-n/--max-tokens must be -1 (no limit) or more, got " + std::to_string(a.max_tokens));
  llama::LoadOptions lo;
  lo.context = a.ctx;
  auto runner = load_llama_runner("generate", a.model, a.run, lo);
  if (!runner) return 1;
  llama::LlamaRunner& r = *runner;
  const tok::Tokenizer& tk = r.tokenizer();
  auto fmt_opt = tok::parse_chat_format(a.chat_format);
  if (!fmt_opt.is_ok()) return fail("generate", fmt_opt.status().message());
  tok::ChatFormat format = fmt_opt->has_value() ? **fmt_opt : tok::detect_chat_format(r.chat_template(), tk);
  if (a.raw) format = tok::ChatFormat{};

  llama::GenerateOptions go;
  go.max_tokens = a.max_tokens;
  go.sampling = a.sampling;
  go.stop = a.stop;
  go.ignore_eos = a.ignore_eos;
  auto encode_prompt = [&](const std::string& text, bool first) {
    tok::EncodeOptions eo;
    eo.allow_special = format.kind != tok::ChatFormat::Kind::kRaw;
    eo.add_bos = first && r.add_bos();
    return tk.encode(text, eo);
  };
  auto fit = [&](std::vector<int32_t>& ids) -> bool {
    const int64_t room = r.context() - r.n_past() - 1;
    if (static_cast<int64_t>(ids.size()) <= room) return true;
    if (!a.truncate) {
      fail("generate", "the prompt has " + std::to_string(ids.size()) + " tokens but only " + std::to_string(room) +
                           " fit in the context (" + std::to_string(r.context()) + "); use --ctx, a shorter prompt, or --truncate");
      return false;
    }
    std::fprintf(stderr, "vrun generate: warning: prompt truncated from %zu to its last %lld tokens\n", ids.size(),
                 static_cast<long long>(room));
    ids.erase(ids.begin(), ids.end() - room);
    return true;
  };

  if (!a.interactive) {
    std::string text = a.prompt;
    if (text.empty() && !isatty(0)) text.assign(std::istreambuf_iterator<char>(std::cin), {});
    if (text.empty()) return fail("generate", "empty prompt: pass -p \"text\" or text on stdin");
    if (format.kind != tok::ChatFormat::Kind::kRaw) {
      std::vector<tok::ChatMessage> msgs;
      if (!a.system.empty()) msgs.push_back({"system", a.system});
      msgs.push_back({"user", text});
      text = tok::render_chat(format, msgs, true);
    }
    std::vector<int32_t> ids = encode_prompt(text, true);
    if (ids.empty()) return fail("generate", "the prompt encodes to no tokens");
    if (!fit(ids)) return 1;
    std::string out;
    auto st = r.generate(ids, go, [&](const std::string& piece) {
      if (a.json) out += piece;
      else {
        std::fwrite(piece.data(), 1, piece.size(), stdout);
        std::fflush(stdout);
      }
      return true;
    });
    if (!st.is_ok()) return fail("generate", st.status().to_string());
    if (a.json) {
      nlohmann::json j = {{"text", out}, {"tokens", st->tokens}, {"stats", stats_json(*st)}};
      std::printf("%s\n", j.dump(2, ' ', false, nlohmann::json::error_handler_t::replace).c_str());
    } else {
      std::printf("\n");
    }
    if (!a.quiet) print_stats(*st);
    return 0;
  }

  // Interactive chat: the cache keeps the conversation; each turn appends its own tokens.
  std::fprintf(stderr, "vrun chat (%s format, %lld-token context). Empty line or Ctrl-D ends.\n",
               tok::chat_format_name(format.kind), static_cast<long long>(r.context()));
  std::vector<tok::ChatMessage> history;
  if (!a.system.empty()) history.push_back({"system", a.system});
  std::string rendered_so_far;
  while (true) {
    std::fprintf(stderr, "> ");
    std::string line;
    if (!std::getline(std::cin, line) || line.empty()) break;
    history.push_back({"user", line});
    const std::string full = tok::render_chat(format, history, true);
    // Only the new part of the conversation goes through the model.
    std::string delta = full.compare(0, rendered_so_far.size(), rendered_so_far) == 0 ? full.substr(rendered_so_far.size()) : full;
    if (delta.size() == full.size() && r.n_past() > 0) r.reset();
    std::vector<int32_t> ids = encode_prompt(delta, r.n_past() == 0);
    if (!fit(ids)) return 1;
    std::string reply;
    auto st = r.generate(ids, go, [&](const std::string& piece) {
      reply += piece;
      std::fwrite(piece.data(), 1, piece.size(), stdout);
      std::fflush(stdout);
      return true;
    });
    if (!st.is_ok()) return fail("generate", st.status().to_string());
    std::printf("\n");
    history.push_back({"assistant", reply});
    // The cache now holds the rendered prompt and the reply's tokens; the template's end-of-turn
    // text is the start of the next turn's delta.
    rendered_so_far = full + reply;
    if (!a.quiet) print_stats(*st);
  }
  return 0;
}

CommandRegistrar reg(
    "generate",
    "Generate text with a Llama-family model (GGUF llama/mistral/qwen2 or a .vrp). Examples:\n"
    "  vrun generate -m SmolLM2-135M-Instruct.Q4_1.gguf -p \"The capital of France is\" -n 32 --temp 0\n"
    "  vrun generate -m model.gguf -i --system \"You are terse.\"",
    [](CLI::App& sub) {
      auto a = std::make_shared<GenerateArgs>();
      sub.add_option("-m,--model", a->model, "Model: .gguf or .vrp")->required();
      sub.add_option("-p,--prompt", a->prompt, "Prompt text (default: stdin)");
      sub.add_option("-n,--max-tokens", a->max_tokens, "Most tokens to generate; -1: until end of text or full context")->capture_default_str();
      sub.add_option("--system", a->system, "System message for chat formats");
      sub.add_option("--chat-format", a->chat_format, "Prompt format: auto (from the model), raw, llama2, llama3, chatml")->capture_default_str();
      sub.add_flag("--raw", a->raw, "Send the prompt as it is, without the chat template");
      sub.add_flag("-i,--interactive", a->interactive, "Chat: read user turns from stdin, keep the conversation in the cache");
      sub.add_option("--temp,--temperature", a->sampling.temperature, "Sampling temperature; 0 = greedy")->capture_default_str();
      sub.add_option("--top-k", a->sampling.top_k, "Keep the k most likely tokens; 0 = off")->capture_default_str();
      sub.add_option("--top-p", a->sampling.top_p, "Keep the smallest set with this much probability; 1 = off")->capture_default_str();
      sub.add_option("--min-p", a->sampling.min_p, "Drop tokens below this fraction of the top probability; 0 = off")->capture_default_str();
      sub.add_option("--repeat-penalty", a->sampling.repeat_penalty, "Penalty for recently seen tokens; 1 = off")->capture_default_str();
      sub.add_option("--repeat-last-n", a->sampling.repeat_last_n, "How many recent tokens the penalty looks at")->capture_default_str();
      sub.add_option("--seed", a->sampling.seed, "Random seed (0: random)")->capture_default_str();
      sub.add_option("--stop", a->stop, "Stop before this string (repeatable)");
      sub.add_flag("--ignore-eos", a->ignore_eos, "Keep generating past the end-of-text token");
      sub.add_option("--ctx", a->ctx, "Context length (KV-cache rows); default: the model's, bounded by memory");
      sub.add_flag("--truncate", a->truncate, "Keep the end of a prompt longer than the context instead of failing");
      sub.add_flag("--json", a->json, "Print one JSON object: text, token ids and stats");
      sub.add_flag("-q,--quiet", a->quiet, "No stats line on stderr");
      add_backend_options(sub, a->run);
      return [a] { return run_generate(*a); };
    });

}  // namespace
}  // namespace vrun::cli
