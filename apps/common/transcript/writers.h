// Transcript files: txt, srt, vtt, tsv, json (openai-whisper's writers' layouts).
#pragma once

#include <string>

#include "apps/common/transcript/transcript.h"
#include "runtime/base/status.h"

namespace vrun::transcript {

// "HH:MM:SS.mmm" (sep '.') or "HH:MM:SS,mmm" (sep ',').
std::string format_timestamp(double seconds, char sep = '.');

// format: txt | srt | vtt | tsv | json. audio names the source in json.
Result<std::string> render_transcript(const Transcript& t, const std::string& format, const std::string& audio);

}  // namespace vrun::transcript
