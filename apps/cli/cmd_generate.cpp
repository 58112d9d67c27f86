// vrun generate: text generation with a Llama-family model (.gguf or .vrp).
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <csignal>
#include <cstdio>
#include <filesystem>
#include <functional>
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

// Ctrl-C during a reply stops that reply and returns to the prompt; at the prompt it ends vrun as
// usual (the default action, raised again).
std::atomic<bool> g_replying{false};
volatile std::sig_atomic_t g_interrupted = 0;
extern "C" void on_sigint(int) {
  if (g_replying.load()) {
    g_interrupted = 1;
    return;
  }
  std::signal(SIGINT, SIG_DFL);
  std::raise(SIGINT);
}

// Tokens a chat keeps free for the reply when it decides what of the conversation to keep: the
// reply's limit, at most half the context (a quarter when the reply has no limit).
int64_t reply_reserve(int max_tokens, int64_t context) {
  if (max_tokens == 0) return 0;
  return max_tokens > 0 ? std::min<int64_t>(max_tokens, context / 2) : context / 4;
}

using EncodeFn = std::function<std::vector<int32_t>(const std::string&, bool)>;

// What of a conversation goes into the cache for its newest user turn: either the new part on top
// of what the cache holds, or (when that does not fit or the template renders the past differently)
// the whole conversation again, its oldest turns dropped until it fits. The system message is
// always kept. Empty ids: the newest turn does not fit even alone.
struct TurnPlan {
  std::vector<int32_t> ids;
  std::string rendered;  // the conversation's text up to the reply
  bool restart = false;  // the cache starts again from ids
  size_t dropped = 0;    // oldest messages dropped
};

TurnPlan plan_turn(std::vector<tok::ChatMessage>& history, size_t first_turn, const tok::ChatFormat& format,
                   const std::string& cached_text, const llama::LlamaRunner& r, int64_t reserve, const EncodeFn& encode) {
  TurnPlan p;
  p.rendered = tok::render_chat(format, history, true);
  if (r.n_past() > 0 && p.rendered.compare(0, cached_text.size(), cached_text) == 0) {
    p.ids = encode(p.rendered.substr(cached_text.size()), false);
    if (static_cast<int64_t>(p.ids.size()) + reserve <= r.context() - r.n_past() - 1) return p;
  }
  // Start again from the beginning, on a copy: a turn that does not fit leaves the history as it was.
  std::vector<tok::ChatMessage> kept = history;
  p.restart = true;
  while (true) {
    p.rendered = tok::render_chat(format, kept, true);
    p.ids = encode(p.rendered, true);
    if (static_cast<int64_t>(p.ids.size()) + reserve <= r.context() - 1 || kept.size() <= first_turn + 1) break;
    // Drop the oldest exchange: its user message and every message up to the next user message.
    size_t end = first_turn + 1;
    while (end + 1 < kept.size() && kept[end].role != "user") ++end;
    p.dropped += end - first_turn;
    kept.erase(kept.begin() + static_cast<std::ptrdiff_t>(first_turn), kept.begin() + static_cast<std::ptrdiff_t>(end));
  }
  if (static_cast<int64_t>(p.ids.size()) > r.context() - 1) {
    p.ids.clear();
    return p;
  }
  history = std::move(kept);
  return p;
}

// Interactive chat: the cache keeps the conversation; each turn appends its own tokens, and a
// conversation that outgrows the context keeps its system message and drops its oldest turns.
int run_chat(const GenerateArgs& a, llama::LlamaRunner& r, const tok::ChatFormat& format, const llama::GenerateOptions& go,
             const EncodeFn& encode) {
  std::fprintf(stderr, "vrun chat (%s format, %lld-token context). Empty line or Ctrl-D ends; Ctrl-C stops a reply.\n",
               tok::chat_format_name(format.kind), static_cast<long long>(r.context()));
  std::signal(SIGINT, on_sigint);
  std::vector<tok::ChatMessage> history;
  if (!a.system.empty()) history.push_back({"system", a.system});
  const size_t first_turn = history.size();
  const int64_t reserve = reply_reserve(a.max_tokens, r.context());
  std::string cached_text;  // the conversation's text that the cache holds
  bool first = true;
  while (true) {
    std::string line;
    if (first && !a.prompt.empty()) {
      line = a.prompt;  // -p is the first turn
      std::fprintf(stderr, "> %s\n", line.c_str());
    } else {
      std::fprintf(stderr, "> ");
      if (!std::getline(std::cin, line) || line.empty()) break;
    }
    first = false;
    history.push_back({"user", line});
    TurnPlan plan = plan_turn(history, first_turn, format, cached_text, r, reserve, encode);
    if (plan.ids.empty()) {
      history.pop_back();
      std::fprintf(stderr, "vrun chat: that message does not fit in the %lld-token context even alone; not sent (use --ctx or a shorter message)\n",
                   static_cast<long long>(r.context()));
      continue;
    }
    if (plan.dropped > 0)
      std::fprintf(stderr, "vrun chat: the conversation outgrew the %lld-token context: dropped its %zu oldest message%s%s\n",
                   static_cast<long long>(r.context()), plan.dropped, plan.dropped == 1 ? "" : "s",
                   first_turn > 0 ? " (the system message is kept)" : "");
    if (plan.restart) r.reset();
    std::string reply;
    g_interrupted = 0;
    g_replying = true;
    auto st = r.generate(plan.ids, go, [&](const std::string& piece) {
      reply += piece;
      std::fwrite(piece.data(), 1, piece.size(), stdout);
      std::fflush(stdout);
      return g_interrupted == 0;
    });
    g_replying = false;
    if (!st.is_ok()) return fail("generate", st.status().to_string());
    std::printf("\n");
    if (g_interrupted) std::fprintf(stderr, "vrun chat: reply stopped\n");
    history.push_back({"assistant", reply});
    // The cache now holds the rendered prompt and the reply's tokens; the template's end-of-turn
    // text is the start of the next turn's delta.
    cached_text = plan.rendered + reply;
    if (!a.quiet) print_stats(*st);
  }
  return 0;
}

int run_generate(GenerateArgs a) {
  if (a.max_tokens < -1) return fail("generate", "-n/--max-tokens must be -1 (no limit) or more, got " + std::to_string(a.max_tokens));
  if (a.ctx == 1) return fail("generate", "--ctx must be 0 (the model's) or at least 2, got 1");
  if (!std::filesystem::exists(a.model)) return fail("generate", "-m/--model: " + a.model + ": no such file or folder");
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
  EncodeFn encode_prompt = [&](const std::string& text, bool first) {
    tok::EncodeOptions eo;
    eo.allow_special = format.kind != tok::ChatFormat::Kind::kRaw;
    eo.add_bos = first && r.add_bos();
    return tk.encode(text, eo);
  };
  auto fit = [&](std::vector<int32_t>& ids) -> bool {
    const int64_t room = r.context() - r.n_past() - 1;
    if (static_cast<int64_t>(ids.size()) <= room) return true;
    if (!a.truncate || room < 1) {
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

  return run_chat(a, r, format, go, encode_prompt);
}

void add_generate_options(CLI::App& sub, GenerateArgs& a) {
  sub.add_option("-m,--model", a.model, "Model: .gguf, a Hugging Face folder or a .vrp")->required();
  sub.add_option("-p,--prompt", a.prompt, "Prompt text (default: stdin); with -i, the first turn");
  sub.add_option("-n,--max-tokens", a.max_tokens, "Most tokens to generate; -1: until end of text or full context")
      ->check(CLI::Range(-1, 1 << 30))
      ->capture_default_str();
  sub.add_option("--system", a.system, "System message for chat formats");
  sub.add_option("--chat-format", a.chat_format, "Prompt format: auto (from the model), raw, llama2, llama3, chatml")
      ->check(CLI::IsMember({"auto", "raw", "llama2", "llama3", "chatml"}))
      ->capture_default_str();
  sub.add_flag("--raw", a.raw, "Send the prompt as it is, without the chat template");
  sub.add_option("--temp,--temperature", a.sampling.temperature, "Sampling temperature; 0 = greedy")
      ->check(CLI::Range(0.0, 100.0))
      ->capture_default_str();
  sub.add_option("--top-k", a.sampling.top_k, "Keep the k most likely tokens; 0 = off")->check(CLI::NonNegativeNumber)->capture_default_str();
  sub.add_option("--top-p", a.sampling.top_p, "Keep the smallest set with this much probability; 1 = off")
      ->check(CLI::Range(0.0, 1.0))
      ->capture_default_str();
  sub.add_option("--min-p", a.sampling.min_p, "Drop tokens below this fraction of the top probability; 0 = off")
      ->check(CLI::Range(0.0, 1.0))
      ->capture_default_str();
  sub.add_option("--repeat-penalty", a.sampling.repeat_penalty, "Penalty for recently seen tokens; 1 = off")
      ->check(CLI::Range(0.0, 100.0))
      ->capture_default_str();
  sub.add_option("--repeat-last-n", a.sampling.repeat_last_n, "How many recent tokens the penalty looks at")
      ->check(CLI::NonNegativeNumber)
      ->capture_default_str();
  sub.add_option("--seed", a.sampling.seed, "Random seed (0: random)")->capture_default_str();
  sub.add_option("--stop", a.stop, "Stop before this string (repeatable)");
  sub.add_flag("--ignore-eos", a.ignore_eos, "Keep generating past the end-of-text token");
  sub.add_option("--ctx", a.ctx, "Context length (KV-cache rows), at least 2; default: the model's, bounded by memory")
      ->check(CLI::Range(int64_t{0}, int64_t{1} << 24));
  sub.add_flag("--truncate", a.truncate, "Keep the end of a prompt longer than the context instead of failing (not with -i: a chat drops its oldest turns)");
  sub.add_flag("--json", a.json, "Print one JSON object: text, token ids and stats");
  sub.add_flag("-q,--quiet", a.quiet, "No stats line on stderr");
  add_backend_options(sub, a.run);
}

// `vrun generate` (a chat with -i) and `vrun chat` (always one) take the same options.
CommandSetup generate_setup(bool chat) {
  return [chat](CLI::App& sub) {
    auto a = std::make_shared<GenerateArgs>();
    add_generate_options(sub, *a);
    if (chat)
      a->interactive = true;
    else
      sub.add_flag("-i,--interactive", a->interactive,
                   "Chat: read user turns from stdin, keep the conversation in the cache (as `vrun chat`)");
    return std::function<int()>([a] { return run_generate(*a); });
  };
}

CommandRegistrar reg(
    "generate",
    "Generate text with a Llama-family model (GGUF llama/mistral/qwen2 or a .vrp). Examples:\n"
    "  vrun generate -m SmolLM2-135M-Instruct.Q4_1.gguf -p \"The capital of France is\" -n 32 --temp 0\n"
    "  vrun generate -m model.gguf -i --system \"You are terse.\"",
    generate_setup(/*chat=*/false));

CommandRegistrar chat_reg(
    "chat",
    "Chat with a Llama-family model: `vrun generate -i`. The conversation stays in the KV cache; when it\n"
    "outgrows the context its oldest turns are dropped (the system message is kept). Examples:\n"
    "  vrun chat -m ~/.cache/vrun/models/SmolLM2-135M-Instruct.Q4_1.gguf\n"
    "  vrun chat -m model.gguf --system \"You are terse.\" -p \"Hello\" --temp 0",
    generate_setup(/*chat=*/true));

}  // namespace
}  // namespace vrun::cli
