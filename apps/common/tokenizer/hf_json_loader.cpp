// Hugging Face tokenizer.json with a byte-level BPE model. Configurations outside what we run are
// refused with the field that is not handled, rather than tokenised differently.
#include <nlohmann/json.hpp>

#include "apps/common/tokenizer/bpe_tokenizer.h"
#include "apps/common/tokenizer/loaders.h"

namespace vrun::tok {

namespace {

using json = nlohmann::json;

// A token id, 0 to 2^31 - 1: a negative one indexed before the vocabulary, nlohmann converts a
// float (9e91) to an integer unchecked (undefined), and an id near 2^63 overflowed the size
// computed from it. Thrown as nlohmann's own type error, which load_hf_tokenizer_json reports
// with the file's name.
int64_t token_id(const json& j) {
  if (!j.is_number_integer()) throw json::type_error::create(302, "token id is " + std::string(j.type_name()) + ", not an integer", &j);
  const int64_t id = j.get<int64_t>();
  if (id < 0 || id >= (int64_t{1} << 31))
    throw json::type_error::create(302, "token id " + std::to_string(id) + " is out of range", &j);
  return id;
}

// Adds the regex steps of one pre-tokenizer; sets *byte_level when it is ByteLevel.
Status add_pre_tokenizer(const json& p, const std::string& source, BpeVocabulary& v, bool* byte_level) {
  const std::string type = p.value("type", "");
  if (type == "Sequence") {
    for (const json& inner : p.at("pretokenizers")) VRUN_RETURN_IF_ERROR(add_pre_tokenizer(inner, source, v, byte_level));
    return Status::ok();
  }
  if (type == "ByteLevel") {
    *byte_level = true;
    v.add_prefix_space = p.value("add_prefix_space", false);
    if (p.value("use_regex", true)) v.pre_steps.push_back({kGpt2Pattern, false});
    return Status::ok();
  }
  if (type == "Digits") {
    v.pre_steps.push_back({p.value("individual_digits", false) ? R"(\p{N})" : R"(\p{N}+)", false});
    return Status::ok();
  }
  if (type == "Split") {
    const json& pattern = p.at("pattern");
    std::string regex;
    if (pattern.contains("Regex")) {
      regex = pattern.at("Regex").get<std::string>();
    } else if (pattern.contains("String")) {
      // A literal: quote it for PCRE2.
      regex = "\\Q" + pattern.at("String").get<std::string>() + "\\E";
    } else {
      return err(ErrorCode::kUnsupported, source, ": pre_tokenizer Split pattern ", pattern.dump(), " is neither Regex nor String");
    }
    const std::string behavior = p.value("behavior", "Isolated");
    if (p.value("invert", false)) return err(ErrorCode::kUnsupported, source, ": pre_tokenizer Split with invert=true is not supported");
    if (behavior != "Isolated" && behavior != "Removed") {
      return err(ErrorCode::kUnsupported, source, ": pre_tokenizer Split behavior '", behavior, "' is not supported (Isolated, Removed are)");
    }
    v.pre_steps.push_back({regex, behavior == "Removed"});
    return Status::ok();
  }
  return err(ErrorCode::kUnsupported, source, ": pre_tokenizer type '", type,
             "' is not supported (ByteLevel, Split, Digits, Sequence are)");
}

Result<std::unique_ptr<Tokenizer>> build(const json& j, const std::string& source) {
  const json& model = j.at("model");
  if (model.value("type", "") != "BPE") {
    return err(ErrorCode::kUnsupported, source, ": model type '", model.value("type", ""), "' is not supported (byte-level BPE is)");
  }
  if (!j.at("normalizer").is_null()) {
    return err(ErrorCode::kUnsupported, source, ": normalizer ", j.at("normalizer").value("type", "?"), " is not supported (none is)");
  }
  if (model.contains("dropout") && !model.at("dropout").is_null() && model.at("dropout").get<double>() > 0) {
    return err(ErrorCode::kUnsupported, source, ": BPE dropout is a training option and is not supported");
  }
  for (const char* key : {"continuing_subword_prefix", "end_of_word_suffix"}) {
    if (model.contains(key) && model.at(key).is_string() && !model.at(key).get<std::string>().empty()) {
      return err(ErrorCode::kUnsupported, source, ": BPE ", key, " is not supported by byte-level BPE");
    }
  }
  if (model.value("byte_fallback", false)) return err(ErrorCode::kUnsupported, source, ": BPE byte_fallback is not supported");

  BpeVocabulary v;
  v.source = source;
  v.ignore_merges = model.value("ignore_merges", false);
  bool byte_level = false;
  if (!j.at("pre_tokenizer").is_null()) VRUN_RETURN_IF_ERROR(add_pre_tokenizer(j.at("pre_tokenizer"), source, v, &byte_level));
  if (!byte_level) return err(ErrorCode::kUnsupported, source, ": no ByteLevel pre_tokenizer: only byte-level BPE is supported");

  const ByteLevelAlphabet& alphabet = byte_level_alphabet();
  const json& vocab = model.at("vocab");
  int64_t size = 0;
  for (auto it = vocab.begin(); it != vocab.end(); ++it) size = std::max<int64_t>(size, token_id(it.value()) + 1);
  for (const json& a : j.at("added_tokens")) size = std::max<int64_t>(size, token_id(a.at("id")) + 1);
  if (size > (1 << 24)) return err(ErrorCode::kInvalidProgram, source, ": vocabulary size ", size, " is implausible");
  v.token_bytes.assign(size, "");
  v.pieces.assign(size, "");
  std::unordered_map<std::string, TokenId> piece_ids;
  for (auto it = vocab.begin(); it != vocab.end(); ++it) {
    const auto id = token_id(it.value());
    if (id < 0) return err(ErrorCode::kInvalidProgram, source, ": token '", it.key(), "' has negative id ", id);
    v.pieces[id] = it.key();
    alphabet.decode(it.key(), v.token_bytes[id]);
    piece_ids.emplace(it.key(), static_cast<TokenId>(id));
  }
  for (const json& a : j.at("added_tokens")) {
    AddedToken t;
    t.content = a.at("content").get<std::string>();
    t.id = static_cast<TokenId>(token_id(a.at("id")));
    t.special = a.value("special", false);
    t.lstrip = a.value("lstrip", false);
    t.rstrip = a.value("rstrip", false);
    t.single_word = a.value("single_word", false);
    // Added tokens decode to their content as written (not through the byte alphabet).
    v.token_bytes[t.id] = t.content;
    if (v.pieces[t.id].empty()) v.pieces[t.id] = t.content;
    v.added.push_back(std::move(t));
  }
  const json& merges = model.at("merges");
  v.merges.reserve(merges.size());
  int32_t rank = 0;
  for (const json& m : merges) {
    std::string left, right;
    if (m.is_string()) {  // "left right"
      const std::string s = m.get<std::string>();
      const size_t space = s.find(' ', 1);
      if (space == std::string::npos) return err(ErrorCode::kInvalidProgram, source, ": merge ", rank, " '", s, "' has no space");
      left = s.substr(0, space);
      right = s.substr(space + 1);
    } else {  // ["left", "right"]
      left = m.at(0).get<std::string>();
      right = m.at(1).get<std::string>();
    }
    auto l = piece_ids.find(left), r = piece_ids.find(right), c = piece_ids.find(left + right);
    if (l == piece_ids.end() || r == piece_ids.end() || c == piece_ids.end()) {
      return err(ErrorCode::kInvalidProgram, source, ": merge ", rank, " '", left, " ", right, "' uses a token missing from the vocabulary");
    }
    v.merges.push_back({l->second, r->second, c->second, rank++});
  }
  auto id_of = [&](const char* content) -> TokenId {
    for (const AddedToken& a : v.added) {
      if (a.content == content) return a.id;
    }
    return -1;
  };
  for (const char* bos : {"<|begin_of_text|>", "<|startoftranscript|>", "<s>"}) {
    if (v.specials.bos < 0) v.specials.bos = id_of(bos);
  }
  for (const char* eos : {"<|end_of_text|>", "<|endoftext|>", "</s>"}) {
    if (v.specials.eos < 0) v.specials.eos = id_of(eos);
  }
  for (const char* eot : {"<|eot_id|>", "<|im_end|>"}) {
    if (v.specials.eot < 0) v.specials.eot = id_of(eot);
  }
  VRUN_ASSIGN_OR_RETURN(auto tokenizer, BpeTokenizer::create(std::move(v)));
  return std::unique_ptr<Tokenizer>(std::move(tokenizer));
}

}  // namespace

Result<std::unique_ptr<Tokenizer>> load_hf_tokenizer_json(std::string_view text, const std::string& source) {
  json j = json::parse(text.begin(), text.end(), nullptr, /*allow_exceptions=*/false);
  if (j.is_discarded()) return err(ErrorCode::kInvalidProgram, source, ": not valid JSON");
  // nlohmann reports missing fields and wrong types by exception; keep them inside this module.
  try {
    return build(j, source);
  } catch (const json::exception& e) {
    return err(ErrorCode::kInvalidProgram, source, ": malformed tokenizer.json: ", e.what());
  }
}

}  // namespace vrun::tok
