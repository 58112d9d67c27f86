// The metadata keys a program stores its tokenizer under: written by the importers (models/),
// read by the tokenizers (apps/common/tokenizer).
#pragma once

namespace vrun::tok {

// Keys a program stores its tokenizer under.
namespace keys {
// "hf_json", "sentencepiece", "tiktoken" or "ggml" (the tokenizer.ggml.* keys below).
inline constexpr const char* kKind = "tokenizer.kind";
inline constexpr const char* kHfJson = "tokenizer.json";               // bytes of tokenizer.json
inline constexpr const char* kSpmModel = "tokenizer.spm_model";        // bytes of tokenizer.model
inline constexpr const char* kTiktokenRanks = "tokenizer.tiktoken";    // bytes of the rank file
inline constexpr const char* kChatTemplate = "tokenizer.chat_template";  // Jinja source, as in GGUF
// GGUF's own keys, kept verbatim.
inline constexpr const char* kGgmlModel = "tokenizer.ggml.model";
inline constexpr const char* kGgmlPre = "tokenizer.ggml.pre";
inline constexpr const char* kGgmlTokens = "tokenizer.ggml.tokens";
inline constexpr const char* kGgmlTokenType = "tokenizer.ggml.token_type";
inline constexpr const char* kGgmlMerges = "tokenizer.ggml.merges";
inline constexpr const char* kGgmlBos = "tokenizer.ggml.bos_token_id";
inline constexpr const char* kGgmlEos = "tokenizer.ggml.eos_token_id";
inline constexpr const char* kGgmlEot = "tokenizer.ggml.eot_token_id";
inline constexpr const char* kGgmlUnk = "tokenizer.ggml.unknown_token_id";
inline constexpr const char* kGgmlPad = "tokenizer.ggml.padding_token_id";
inline constexpr const char* kGgmlAddBos = "tokenizer.ggml.add_bos_token";
}  // namespace keys

}  // namespace vrun::tok
