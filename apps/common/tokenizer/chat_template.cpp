#include "apps/common/tokenizer/chat_template.h"

namespace vrun::tok {

namespace {

std::string_view trim(std::string_view s) {
  const char* ws = " \t\n\r\f\v";
  const size_t b = s.find_first_not_of(ws);
  if (b == std::string_view::npos) return {};
  return s.substr(b, s.find_last_not_of(ws) - b + 1);
}

// The system text a ChatML template writes when the conversation has no system turn: the literal
// between "<|im_start|>system" plus a newline (real or escaped) and "<|im_end|>".
std::string default_system_prompt(std::string_view source) {
  const std::string_view open = "<|im_start|>system";
  size_t at = source.find(open);
  while (at != std::string_view::npos) {
    size_t start = at + open.size();
    if (source.compare(start, 2, "\\n") == 0) {
      start += 2;
    } else if (source.compare(start, 1, "\n") == 0) {
      start += 1;
    } else {
      at = source.find(open, start);
      continue;
    }
    const size_t end = source.find("<|im_end|>", start);
    if (end == std::string_view::npos) return {};
    const std::string_view text = source.substr(start, end - start);
    // "<|im_start|>system\n' + message['content']": not a literal prompt.
    if (text.find('\'') != std::string_view::npos || text.find('{') != std::string_view::npos) {
      at = source.find(open, end);
      continue;
    }
    return std::string(text);
  }
  return {};
}

}  // namespace

const char* chat_format_name(ChatFormat::Kind kind) {
  switch (kind) {
    case ChatFormat::Kind::kRaw: return "raw";
    case ChatFormat::Kind::kLlama2: return "llama2";
    case ChatFormat::Kind::kLlama3: return "llama3";
    case ChatFormat::Kind::kChatML: return "chatml";
  }
  return "raw";
}

Result<std::optional<ChatFormat>> parse_chat_format(std::string_view name) {
  if (name == "auto") return std::optional<ChatFormat>();
  for (auto kind : {ChatFormat::Kind::kRaw, ChatFormat::Kind::kLlama2, ChatFormat::Kind::kLlama3, ChatFormat::Kind::kChatML}) {
    if (name == chat_format_name(kind)) return std::optional<ChatFormat>(ChatFormat{kind, {}});
  }
  return err(ErrorCode::kInvalidArgument, "chat template '", name, "' is not one of auto, raw, llama2, llama3, chatml");
}

ChatFormat detect_chat_format(std::optional<std::string_view> source, const Tokenizer& tokenizer) {
  if (source) {
    if (source->find("<|im_start|>") != std::string_view::npos) {
      return {ChatFormat::Kind::kChatML, default_system_prompt(*source)};
    }
    if (source->find("<|start_header_id|>") != std::string_view::npos) return {ChatFormat::Kind::kLlama3, {}};
    if (source->find("[INST]") != std::string_view::npos) return {ChatFormat::Kind::kLlama2, {}};
  }
  if (tokenizer.piece_to_id("<|start_header_id|>")) return {ChatFormat::Kind::kLlama3, {}};
  if (tokenizer.piece_to_id("<|im_start|>")) return {ChatFormat::Kind::kChatML, {}};
  if (tokenizer.kind() == "sentencepiece" && tokenizer.piece_to_id("<s>")) return {ChatFormat::Kind::kLlama2, {}};
  return {};
}

std::string render_chat(const ChatFormat& format, std::span<const ChatMessage> messages, bool add_generation_prompt) {
  std::string out;
  switch (format.kind) {
    case ChatFormat::Kind::kRaw:
      for (const ChatMessage& m : messages) out += m.content;
      return out;
    case ChatFormat::Kind::kChatML:
      if (!format.default_system.empty() && (messages.empty() || messages[0].role != "system")) {
        out += "<|im_start|>system\n" + format.default_system + "<|im_end|>\n";
      }
      for (const ChatMessage& m : messages) out += "<|im_start|>" + m.role + "\n" + m.content + "<|im_end|>\n";
      if (add_generation_prompt) out += "<|im_start|>assistant\n";
      return out;
    case ChatFormat::Kind::kLlama3:
      // Meta's template trims each content and starts with <|begin_of_text|>.
      out = "<|begin_of_text|>";
      for (const ChatMessage& m : messages) {
        out += "<|start_header_id|>" + m.role + "<|end_header_id|>\n\n";
        out += trim(m.content);
        out += "<|eot_id|>";
      }
      if (add_generation_prompt) out += "<|start_header_id|>assistant<|end_header_id|>\n\n";
      return out;
    case ChatFormat::Kind::kLlama2: {
      // <s>[INST] <<SYS>>\n{system}\n<</SYS>>\n\n{user} [/INST] {answer} </s><s>[INST] ...; the
      // system turn folds into the first user turn. The generation prompt is implicit.
      std::string system;
      size_t i = 0;
      if (!messages.empty() && messages[0].role == "system") {
        system = "<<SYS>>\n" + std::string(trim(messages[0].content)) + "\n<</SYS>>\n\n";
        i = 1;
      }
      for (; i < messages.size(); ++i) {
        const ChatMessage& m = messages[i];
        if (m.role == "assistant") {
          out += " " + std::string(trim(m.content)) + " </s>";
        } else {
          out += "<s>[INST] " + system + std::string(trim(m.content)) + " [/INST]";
          system.clear();
        }
      }
      return out;
    }
  }
  return out;
}

}  // namespace vrun::tok
