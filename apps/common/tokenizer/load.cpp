#include <cctype>
#include <fstream>

#include <nlohmann/json.hpp>

#include "apps/common/tokenizer/gguf_metadata.h"
#include "apps/common/tokenizer/loaders.h"

namespace vrun::tok {

Result<std::string> read_file_bytes(const std::string& path) {
  std::ifstream in(path, std::ios::binary | std::ios::ate);
  if (!in) return err(ErrorCode::kIo, path, ": cannot open");
  const auto size = static_cast<size_t>(in.tellg());
  std::string bytes(size, '\0');
  in.seekg(0);
  if (!in.read(bytes.data(), static_cast<std::streamsize>(size))) return err(ErrorCode::kIo, path, ": read failed");
  return bytes;
}

Result<std::unique_ptr<Tokenizer>> load_tokenizer(const MetadataView& meta, const std::string& source) {
  const auto kind = meta.get_string(keys::kKind);
  auto need = [&](const char* key) -> Result<std::string_view> {
    if (auto v = meta.get_string(key)) return *v;
    return err(ErrorCode::kNotFound, source, ": tokenizer kind '", kind.value_or(""), "' but no '", key, "' entry");
  };
  if (!kind) {
    // GGUF files (and programs that copied their keys) carry no kind.
    if (meta.get_string(keys::kGgmlModel)) return load_ggml_vocabulary(meta, source);
    return err(ErrorCode::kNotFound, source, ": no tokenizer (neither '", keys::kKind, "' nor '", keys::kGgmlModel, "')");
  }
  if (*kind == "ggml") return load_ggml_vocabulary(meta, source);
  if (*kind == "hf_json") {
    VRUN_ASSIGN_OR_RETURN(auto bytes, need(keys::kHfJson));
    return load_hf_tokenizer_json(bytes, source + ":" + keys::kHfJson);
  }
  if (*kind == "sentencepiece") {
    VRUN_ASSIGN_OR_RETURN(auto bytes, need(keys::kSpmModel));
    return load_sentencepiece(bytes, source + ":" + keys::kSpmModel);
  }
  if (*kind == "tiktoken") {
    VRUN_ASSIGN_OR_RETURN(auto bytes, need(keys::kTiktokenRanks));
    return load_tiktoken_ranks(bytes, source + ":" + keys::kTiktokenRanks);
  }
  return err(ErrorCode::kUnsupported, source, ": tokenizer kind '", *kind,
             "' is not one of hf_json, sentencepiece, tiktoken, ggml");
}

namespace {

bool looks_like_tiktoken(std::string_view bytes) {
  const size_t nl = bytes.find('\n');
  const std::string_view line = bytes.substr(0, nl == std::string_view::npos ? bytes.size() : nl);
  const size_t space = line.find(' ');
  if (space == std::string_view::npos || space == 0 || space + 1 >= line.size()) return false;
  for (char c : line.substr(0, space)) {
    if (!(std::isalnum(static_cast<unsigned char>(c)) || c == '+' || c == '/' || c == '=')) return false;
  }
  for (char c : line.substr(space + 1)) {
    if (!(std::isdigit(static_cast<unsigned char>(c)) || c == '\r')) return false;
  }
  return true;
}

}  // namespace

Result<std::unique_ptr<Tokenizer>> load_tokenizer_file(const std::string& path) {
  std::ifstream probe(path, std::ios::binary);
  if (!probe) return err(ErrorCode::kIo, path, ": cannot open");
  char magic[8] = {};
  probe.read(magic, sizeof(magic));
  if (std::string_view(magic, 4) == "GGUF") {
    VRUN_ASSIGN_OR_RETURN(MetadataMap meta, read_gguf_metadata(path));
    return load_tokenizer(meta, path);
  }
  if (std::string_view(magic, 7) == "VRUNPRG") {
    return err(ErrorCode::kInvalidArgument, path,
               ": a .vrp program: load it with load_program and read it through ProgramMetadataView");
  }
  VRUN_ASSIGN_OR_RETURN(std::string bytes, read_file_bytes(path));
  const size_t first = bytes.find_first_not_of(" \t\r\n");
  if (first != std::string::npos && bytes[first] == '{') return load_hf_tokenizer_json(bytes, path);
  if (looks_like_tiktoken(bytes)) return load_tiktoken_ranks(bytes, path);
  auto spm = load_sentencepiece(bytes, path);
  if (spm.is_ok()) return spm;
  return err(ErrorCode::kUnsupported, path,
             ": not a tokenizer this build reads (GGUF, tokenizer.json, SentencePiece or tiktoken tokenizer.model)");
}

std::optional<std::string> read_chat_template(const std::string& path) {
  std::ifstream probe(path, std::ios::binary);
  char magic[4] = {};
  probe.read(magic, sizeof(magic));
  if (std::string_view(magic, 4) == "GGUF") {
    auto meta = read_gguf_metadata(path);
    if (!meta.is_ok()) return std::nullopt;
    auto t = meta->get_string(keys::kChatTemplate);
    return t ? std::optional<std::string>(std::string(*t)) : std::nullopt;
  }
  // Hugging Face folders keep the template next to tokenizer.json.
  const size_t slash = path.find_last_of('/');
  const std::string config = (slash == std::string::npos ? std::string() : path.substr(0, slash + 1)) + "tokenizer_config.json";
  auto bytes = read_file_bytes(config);
  if (!bytes.is_ok()) return std::nullopt;
  auto j = nlohmann::json::parse(*bytes, nullptr, /*allow_exceptions=*/false);
  if (j.is_discarded() || !j.is_object() || !j.contains("chat_template") || !j["chat_template"].is_string()) {
    return std::nullopt;
  }
  return j["chat_template"].get<std::string>();
}

}  // namespace vrun::tok
