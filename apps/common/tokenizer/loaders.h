// Builds tokenizers from the files and metadata we meet: Hugging Face tokenizer.json, GGUF
// `tokenizer.ggml.*` metadata, tiktoken rank files (Llama-3 tokenizer.model) and SentencePiece
// model protos. Every loader takes bytes already in memory, so a .vrp program can hand them over.
#pragma once

#include <memory>
#include <optional>
#include <string>
#include <string_view>

#include "apps/common/tokenizer/metadata.h"
#include "apps/common/tokenizer/tokenizer.h"
#include "runtime/base/status.h"

namespace vrun::tok {

// source is the file (or program key) the bytes came from; it prefixes every error message.
Result<std::unique_ptr<Tokenizer>> load_hf_tokenizer_json(std::string_view json, const std::string& source);
Result<std::unique_ptr<Tokenizer>> load_tiktoken_ranks(std::string_view ranks, const std::string& source);
Result<std::unique_ptr<Tokenizer>> load_sentencepiece(std::string_view model_proto, const std::string& source);
// tokenizer.ggml.* keys (GGUF, or the same keys copied into a program).
Result<std::unique_ptr<Tokenizer>> load_ggml_vocabulary(const MetadataView& meta, const std::string& source);

// From any metadata view that holds a tokenizer under the keys of metadata.h.
Result<std::unique_ptr<Tokenizer>> load_tokenizer(const MetadataView& meta, const std::string& source);

// From a file: .gguf, tokenizer.json, a SentencePiece or tiktoken tokenizer.model (told apart by
// content), or a .vrp program.
Result<std::unique_ptr<Tokenizer>> load_tokenizer_file(const std::string& path);

Result<std::string> read_file_bytes(const std::string& path);

// The Jinja chat template a model file carries (GGUF tokenizer.chat_template, or the
// tokenizer_config.json beside a tokenizer.json), if any.
std::optional<std::string> read_chat_template(const std::string& path);

}  // namespace vrun::tok
