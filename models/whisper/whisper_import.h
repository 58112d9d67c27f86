// Whisper checkpoints in every layout vrun reads, told apart by what is on disk:
//   - a faster-whisper / CTranslate2 folder (model.bin, config.json, tokenizer.json or vocabulary),
//   - a Hugging Face WhisperForConditionalGeneration folder (config.json with model_type whisper,
//     model.safetensors or a sharded index, tokenizer.json, generation_config.json),
//   - a whisper.cpp ggml file (magic 0x67676d6c: hparams, mel filters, vocabulary, tensors).
// Each importer serves the weights under CTranslate2's WhisperSpec names (whisper_model.h).
#pragma once

#include <functional>
#include <optional>
#include <string>
#include <vector>

#include "models/whisper/ct2_whisper.h"

namespace vrun::whisper {

// Whether `path` is a Whisper checkpoint in one of the layouts above (cheap: reads at most a
// config.json or a file's first bytes).
bool is_whisper_checkpoint(const std::string& path);

Result<ImportedWhisper> import_whisper(const std::string& path);

// ---- Building blocks the importers share.

// How a layout names the tensors of one canonical weight.
enum class WeightNaming { kHuggingFace, kOpenAI };

struct WeightPart {
  std::string name;
  bool zero_if_absent = false;  // Whisper's k projections have no bias: CTranslate2 stores zeros there
};

// The source tensors whose rows, concatenated in order, make canonical weight `name` (q, k, v for
// a fused self-attention projection); empty for a name the layout does not have.
std::vector<WeightPart> source_parts(const std::string& canonical, WeightNaming naming);

// Serves canonical names from a layout's own tensors, fusing rows where CTranslate2 fuses them.
// `lookup` returns a tensor by the layout's name (nullopt when absent).
using TensorLookup = std::function<std::optional<Weight>(const std::string& name)>;
WeightSource fused_weight_source(TensorLookup lookup, WeightNaming naming);

// Whisper's special tokens follow the byte-level tokens in a fixed order that depends only on the
// vocabulary size: <|endoftext|> (50256 English-only, 50257 multilingual), <|startoftranscript|>,
// one token per language (99, or 100 from large-v3 on), <|translate|>, <|transcribe|>,
// <|startoflm|>, <|startofprev|>, <|nospeech|>, <|notimestamps|>, then the timestamps <|0.00|> ...
struct SpecialLayout {
  int64_t eot = 0, sot = 0, n_languages = 0, translate = 0, transcribe = 0, startoflm = 0, startofprev = 0,
          nospeech = 0, notimestamps = 0, timestamp_begin = 0;
};
Result<SpecialLayout> special_layout(int64_t n_vocab);

// openai-whisper's language codes in token order ("en", "zh", ..., "yue").
const std::vector<std::string>& whisper_language_codes();

// A Hugging Face tokenizer.json (byte-level BPE, the GPT-2 pre-tokenizer, merges implied by the
// token order as tiktoken ranks imply them, special tokens as added tokens) for a vocabulary given
// as each id's raw bytes, ids below <|endoftext|>.
Result<std::string> tokenizer_json_from_token_bytes(const std::vector<std::string>& token_bytes, int64_t n_vocab,
                                                    const std::string& source);

// openai-whisper's non-speech tokens (Tokenizer.non_speech_tokens) and the tokens of " " for the
// same byte-level vocabulary: what suppress_tokens and begin_suppress_tokens hold in published
// configs, for layouts (ggml) that carry no config.
std::vector<int64_t> non_speech_tokens(const std::vector<std::string>& token_bytes);
std::vector<int64_t> encode_bytes(const std::vector<std::string>& token_bytes, const std::string& text);

// Inverse of GPT-2's bytes-to-unicode map: a byte-level token string back to raw bytes; nullopt
// when a character is outside the byte alphabet (special tokens).
std::optional<std::string> byte_level_to_bytes(const std::string& token);

// alignment_heads for checkpoints that carry none: openai-whisper's published heads where the
// dimensions name one model unambiguously, else its default (every head of the second half of the
// decoder layers). `which` says which one was used.
std::vector<int64_t> default_alignment_heads(const WhisperConfig& c, std::string* which);

}  // namespace vrun::whisper
