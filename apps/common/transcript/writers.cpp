#include "apps/common/transcript/writers.h"

#include <cmath>
#include <cstdio>
#include <nlohmann/json.hpp>

namespace vrun::transcript {

namespace {

std::string trim(const std::string& s) {
  const size_t b = s.find_first_not_of(' ');
  return b == std::string::npos ? "" : s.substr(b, s.find_last_not_of(' ') - b + 1);
}

}  // namespace

std::string Transcript::text() const {
  std::string t;
  for (const auto& s : segments) t += s.text;
  return trim(t);
}

std::string format_timestamp(double seconds, char sep) {
  const int64_t ms = std::max<int64_t>(0, std::llround(seconds * 1000.0));
  char buf[48];
  std::snprintf(buf, sizeof buf, "%02lld:%02lld:%02lld%c%03lld", static_cast<long long>(ms / 3600000),
                static_cast<long long>(ms / 60000 % 60), static_cast<long long>(ms / 1000 % 60), sep,
                static_cast<long long>(ms % 1000));
  return buf;
}

nlohmann::json segment_json(const Segment& s) {
  return {{"start", s.start},
          {"end", s.end},
          {"text", s.text},
          {"tokens", s.tokens},
          {"avg_logprob", s.avg_logprob},
          {"no_speech_prob", s.no_speech_prob},
          {"temperature", s.temperature},
          {"compression_ratio", s.compression_ratio}};
}

Result<std::string> render_transcript(const Transcript& t, const std::string& format, const std::string& audio) {
  std::string out;
  if (format == "txt") {
    for (const auto& s : t.segments) out += trim(s.text) + "\n";
  } else if (format == "srt") {
    int i = 1;
    for (const auto& s : t.segments)
      out += std::to_string(i++) + "\n" + format_timestamp(s.start, ',') + " --> " + format_timestamp(s.end, ',') + "\n" +
             trim(s.text) + "\n\n";
  } else if (format == "vtt") {
    out = "WEBVTT\n\n";
    for (const auto& s : t.segments)
      out += format_timestamp(s.start) + " --> " + format_timestamp(s.end) + "\n" + trim(s.text) + "\n\n";
  } else if (format == "tsv") {
    // openai-whisper's WriteTSV: integer milliseconds, tabs in the text become spaces.
    out = "start\tend\ttext\n";
    for (const auto& s : t.segments) {
      std::string text = trim(s.text);
      for (char& c : text)
        if (c == '\t') c = ' ';
      out += std::to_string(std::llround(1000.0 * s.start)) + "\t" + std::to_string(std::llround(1000.0 * s.end)) + "\t" + text + "\n";
    }
  } else if (format == "json") {
    nlohmann::json j;
    j["audio"] = audio;
    j["language"] = t.language;
    j["language_probability"] = t.language_probability;
    j["text"] = t.text();
    j["segments"] = nlohmann::json::array();
    int id = 0;
    for (const auto& s : t.segments) {
      nlohmann::json seg = segment_json(s);
      seg["id"] = id++;
      if (!s.words.empty()) {
        seg["words"] = nlohmann::json::array();
        for (const auto& w : s.words)
          seg["words"].push_back({{"start", w.start}, {"end", w.end}, {"word", w.text}, {"probability", w.probability}});
      }
      j["segments"].push_back(std::move(seg));
    }
    out = j.dump(1, ' ', false, nlohmann::json::error_handler_t::replace) + "\n";
  } else {
    return err(ErrorCode::kInvalidArgument, "output format '", format, "' (expected txt, srt, vtt, tsv or json)");
  }
  return out;
}

}  // namespace vrun::transcript
