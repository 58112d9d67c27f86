// Chat prompt formats of the families we run, chosen from the model's metadata (the Jinja
// template a GGUF or tokenizer_config carries, else the vocabulary's special tokens). We render the
// known formats directly instead of evaluating Jinja.
#pragma once

#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "apps/common/tokenizer/tokenizer.h"
#include "runtime/base/status.h"

namespace vrun::tok {

struct ChatMessage {
  std::string role;  // "system", "user", "assistant"
  std::string content;
};

struct ChatFormat {
  enum class Kind { kRaw, kLlama2, kLlama3, kChatML };
  Kind kind = Kind::kRaw;
  // ChatML templates insert a system turn when the conversation has none (SmolLM2, Qwen2).
  std::string default_system;
};

// "raw", "llama2", "llama3", "chatml"; "auto" returns nullopt (detect instead).
Result<std::optional<ChatFormat>> parse_chat_format(std::string_view name);
// From the Jinja source when there is one, else from the tokenizer's special tokens; raw when
// nothing identifies a format.
ChatFormat detect_chat_format(std::optional<std::string_view> jinja_template, const Tokenizer& tokenizer);
const char* chat_format_name(ChatFormat::Kind kind);

// The prompt text as the model's template renders it (special tokens written as text, to be
// encoded with allow_special). Raw concatenates the contents.
std::string render_chat(const ChatFormat& format, std::span<const ChatMessage> messages, bool add_generation_prompt);

}  // namespace vrun::tok
