// GGUF `tokenizer.ggml.*` vocabularies with model "gpt2" (byte-level BPE). The `pre` type picks the
// pre-tokenizer regexes as llama.cpp does for the same name; names we have not checked are refused.
#include <map>

#include "apps/common/tokenizer/bpe_tokenizer.h"
#include "apps/common/tokenizer/loaders.h"

namespace vrun::tok {

namespace {

// GGUF token types.
constexpr int64_t kTypeNormal = 1, kTypeUnknown = 2, kTypeControl = 3, kTypeUserDefined = 4;

Result<std::vector<SplitStep>> steps_for_pre(std::string_view pre, const std::string& source, bool* ignore_merges) {
  *ignore_merges = false;
  if (pre == "default" || pre == "gpt-2" || pre == "gpt2" || pre == "mpt" || pre == "olmo" || pre == "jais") {
    return std::vector<SplitStep>{{kGpt2Pattern, false}};
  }
  // Single digits first, then the GPT-2 pattern on what is left.
  if (pre == "smollm" || pre == "starcoder" || pre == "refact" || pre == "command-r" || pre == "codeshell" ||
      pre == "exaone" || pre == "minerva-7b") {
    return std::vector<SplitStep>{{R"(\p{N})", false}, {kGpt2Pattern, false}};
  }
  if (pre == "llama3" || pre == "llama-v3" || pre == "llama-bpe" || pre == "falcon3" || pre == "pixtral") {
    *ignore_merges = true;
    return std::vector<SplitStep>{{kLlama3Pattern, false}};
  }
  if (pre == "qwen2" || pre == "stablelm2" || pre == "deepseek-r1-qwen" || pre == "megrez") {
    return std::vector<SplitStep>{{kQwen2Pattern, false}};
  }
  return err(ErrorCode::kUnsupported, source, ": tokenizer.ggml.pre '", pre,
             "' is not supported (default, gpt2, smollm, starcoder, llama3/llama-bpe, qwen2 and their aliases are)");
}

}  // namespace

Result<std::unique_ptr<Tokenizer>> load_ggml_vocabulary(const MetadataView& meta, const std::string& source) {
  const auto model = meta.get_string(keys::kGgmlModel);
  if (!model) return err(ErrorCode::kNotFound, source, ": no ", keys::kGgmlModel, " key");
  if (*model != "gpt2") {
    return err(ErrorCode::kUnsupported, source, ": tokenizer.ggml.model '", *model,
               "' is not supported here (byte-level BPE 'gpt2' is; load a SentencePiece model from its tokenizer.model)");
  }
  const std::vector<std::string>* tokens = meta.get_strings(keys::kGgmlTokens);
  const std::vector<std::string>* merges = meta.get_strings(keys::kGgmlMerges);
  if (tokens == nullptr) return err(ErrorCode::kNotFound, source, ": no ", keys::kGgmlTokens, " string array");
  if (merges == nullptr) return err(ErrorCode::kNotFound, source, ": no ", keys::kGgmlMerges, " string array");
  const auto types = meta.get_ints(keys::kGgmlTokenType);
  if (types && types->size() != tokens->size()) {
    return err(ErrorCode::kInvalidProgram, source, ": ", keys::kGgmlTokenType, " has ", types->size(), " entries for ",
               tokens->size(), " tokens");
  }
  BpeVocabulary v;
  v.source = source;
  // llama.cpp replaces invalid input bytes one by one.
  v.invalid_utf8 = InvalidUtf8::kReplacePerByteLenient;
  const std::string pre(meta.get_string(keys::kGgmlPre).value_or("default"));
  VRUN_ASSIGN_OR_RETURN(v.pre_steps, steps_for_pre(pre, source, &v.ignore_merges));

  const ByteLevelAlphabet& alphabet = byte_level_alphabet();
  const size_t n = tokens->size();
  v.token_bytes.resize(n);
  v.pieces = *tokens;
  std::unordered_map<std::string_view, TokenId> ids;
  ids.reserve(n);
  for (size_t i = 0; i < n; ++i) {
    const int64_t type = types ? (*types)[i] : kTypeNormal;
    const std::string& text = (*tokens)[i];
    ids.emplace(text, static_cast<TokenId>(i));
    if (type == kTypeControl || type == kTypeUnknown || type == kTypeUserDefined) {
      // These are stored as plain text, matched in the input before pre-tokenisation; control
      // and unknown ones only when special tokens are allowed.
      v.token_bytes[i] = text;
      if (!text.empty()) v.added.push_back({text, static_cast<TokenId>(i), type != kTypeUserDefined});
    } else {
      alphabet.decode(text, v.token_bytes[i]);
    }
  }
  v.merges.reserve(merges->size());
  for (size_t r = 0; r < merges->size(); ++r) {
    const std::string& s = (*merges)[r];
    const size_t space = s.find(' ', 1);
    if (space == std::string::npos) return err(ErrorCode::kInvalidProgram, source, ": merge ", r, " '", s, "' has no space");
    const std::string left = s.substr(0, space), right = s.substr(space + 1);
    auto l = ids.find(left), rr = ids.find(right), c = ids.find(left + right);
    if (l == ids.end() || rr == ids.end() || c == ids.end()) {
      return err(ErrorCode::kInvalidProgram, source, ": merge ", r, " '", s, "' uses a token missing from ", keys::kGgmlTokens);
    }
    v.merges.push_back({l->second, rr->second, c->second, static_cast<int32_t>(r)});
  }
  auto id_key = [&](const char* key) -> TokenId {
    const auto id = meta.get_int(key);
    return id && *id >= 0 && static_cast<size_t>(*id) < n ? static_cast<TokenId>(*id) : -1;
  };
  v.specials.bos = id_key(keys::kGgmlBos);
  v.specials.eos = id_key(keys::kGgmlEos);
  v.specials.eot = id_key(keys::kGgmlEot);
  v.specials.unk = id_key(keys::kGgmlUnk);
  v.specials.pad = id_key(keys::kGgmlPad);
  if (v.specials.eot < 0) {
    for (const char* text : {"<|eot_id|>", "<|im_end|>", "<|end|>", "<end_of_turn>"}) {
      if (auto it = ids.find(text); it != ids.end() && v.specials.eot < 0) v.specials.eot = it->second;
    }
  }
  VRUN_ASSIGN_OR_RETURN(auto tokenizer, BpeTokenizer::create(std::move(v)));
  return std::unique_ptr<Tokenizer>(std::move(tokenizer));
}

}  // namespace vrun::tok
