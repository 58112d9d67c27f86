#include "apps/speech/decoding_choices.h"

#include <algorithm>

namespace vrun::speech {

Status DecodingChoices::validate(const std::string& prefix, char separator) const {
  const auto name = [&](std::string field) {
    std::replace(field.begin(), field.end(), '_', separator);
    return prefix + field;
  };
  const auto range = [&](const char* field, const char* accepted, double got) {
    return err(ErrorCode::kInvalidArgument, name(field), " must be ", accepted, ", got ", got);
  };
  if (beam_size < 1) return range("beam_size", ">= 1", beam_size);
  if (best_of < 1) return range("best_of", ">= 1", best_of);
  if (!(temperature >= 0 && temperature <= 1)) return range("temperature", "in [0, 1]", temperature);
  if (!(temperature_increment > 0)) return range("temperature_increment", "> 0", temperature_increment);
  if (!(patience > 0)) return range("patience", "> 0", patience);
  if (attention != "full" && attention != "local")
    return err(ErrorCode::kInvalidArgument, name("attention"), " must be full or local, got '", attention, "'");
  if (task != "transcribe" && task != "translate")
    return err(ErrorCode::kInvalidArgument, name("task"), " must be transcribe or translate, got '", task, "'");
  return Status::ok();
}

Options DecodingChoices::options() const {
  Options o;
  o.whisper = {.timestamps = timestamps,
               .language = language,
               .task = task,
               .temperatures = whisper::TranscribeOptions::temperature_schedule(temperature, temperature_increment, fallback),
               .compression_ratio_threshold = compression_ratio_threshold,
               .logprob_threshold = logprob_threshold,
               .no_speech_threshold = no_speech_threshold,
               .beam_size = beam_size,
               .best_of = best_of,
               .patience = patience,
               .length_penalty = length_penalty,
               .seed = seed,
               .condition_on_previous_text = condition_on_previous_text,
               .initial_prompt = prompt,
               .word_timestamps = word_timestamps};
  o.local_attention = attention == "local";
  return o;
}

}  // namespace vrun::speech
