// Transcript files: txt, srt, vtt, tsv, json (openai-whisper's writers' layouts).
#pragma once

#include <nlohmann/json.hpp>
#include <string>

#include "apps/common/transcript/transcript.h"
#include "runtime/base/status.h"

namespace vrun::transcript {

// "HH:MM:SS.mmm" (sep '.') or "HH:MM:SS,mmm" (sep ',').
std::string format_timestamp(double seconds, char sep = '.');

// format: txt | srt | vtt | tsv | json. audio names the source in json.
Result<std::string> render_transcript(const Transcript& t, const std::string& format, const std::string& audio);

// A segment's times, text, tokens and decoding scores as JSON (json's and the server's
// verbose_json's segment fields, without id and words).
nlohmann::json segment_json(const Segment& s);

}  // namespace vrun::transcript
