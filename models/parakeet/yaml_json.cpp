#include "models/parakeet/yaml_json.h"

#include <yaml.h>

#include <cmath>
#include <limits>
#include <memory>
#include <regex>
#include <vector>

namespace vrun::parakeet {

using nlohmann::json;

namespace {

json plain_scalar(const std::string& v) {
  if (v.empty() || v == "~" || v == "null" || v == "Null" || v == "NULL") return nullptr;
  for (const char* t : {"true", "True", "TRUE", "yes", "Yes", "YES", "on", "On", "ON"})
    if (v == t) return true;
  for (const char* f : {"false", "False", "FALSE", "no", "No", "NO", "off", "Off", "OFF"})
    if (v == f) return false;
  static const std::regex int_re("[-+]?(0|[1-9][0-9_]*)");
  static const std::regex float_re("[-+]?(([0-9][0-9_]*)?\\.[0-9_]*([eE][-+]?[0-9]+)?|[0-9][0-9_]*[eE][-+]?[0-9]+)");
  std::string s;
  for (char c : v)
    if (c != '_') s += c;
  if (std::regex_match(v, int_re)) {
    errno = 0;
    const long long i = std::strtoll(s.c_str(), nullptr, 10);
    if (errno == 0) return static_cast<int64_t>(i);
    return std::strtod(s.c_str(), nullptr);
  }
  if (std::regex_match(v, float_re) && v != "." && v != "+." && v != "-.") return std::strtod(s.c_str(), nullptr);
  if (v == ".inf" || v == ".Inf" || v == ".INF" || v == "+.inf") return std::numeric_limits<double>::infinity();
  if (v == "-.inf" || v == "-.Inf" || v == "-.INF") return -std::numeric_limits<double>::infinity();
  if (v == ".nan" || v == ".NaN" || v == ".NAN") return std::numeric_limits<double>::quiet_NaN();
  return v;
}

struct Parser {
  yaml_parser_t p;
  Parser() { yaml_parser_initialize(&p); }
  ~Parser() { yaml_parser_delete(&p); }
};
struct Event {
  yaml_event_t e{};
  bool live = false;
  ~Event() {
    if (live) yaml_event_delete(&e);
  }
};

}  // namespace

Result<json> parse_yaml(std::string_view text, const std::string& source) {
  Parser parser;
  yaml_parser_set_input_string(&parser.p, reinterpret_cast<const unsigned char*>(text.data()), text.size());
  // Containers being filled; for a mapping, the pending key (empty optional = expecting a key).
  struct Frame {
    json value;
    bool is_map = false;
    bool have_key = false;
    std::string key;
  };
  std::vector<Frame> stack;
  json root;
  bool have_root = false;
  auto bad = [&](const Parser& pr, const std::string& what) {
    return err(ErrorCode::kInvalidArgument, source, ": YAML ", what, " at line ", pr.p.problem_mark.line + 1);
  };
  auto add = [&](json v) -> Status {
    if (stack.empty()) {
      root = std::move(v);
      have_root = true;
      return Status::ok();
    }
    Frame& f = stack.back();
    if (!f.is_map) {
      f.value.push_back(std::move(v));
    } else if (!f.have_key) {
      if (!v.is_string() && !v.is_number() && !v.is_boolean() && !v.is_null())
        return err(ErrorCode::kUnsupported, source, ": YAML mapping key that is not a scalar");
      f.key = v.is_string() ? v.get<std::string>() : v.dump();
      f.have_key = true;
    } else {
      f.value[f.key] = std::move(v);
      f.have_key = false;
    }
    return Status::ok();
  };
  for (size_t events = 0;; ++events) {
    Event ev;
    if (!yaml_parser_parse(&parser.p, &ev.e))
      return bad(parser, std::string("error: ") + (parser.p.problem ? parser.p.problem : "malformed"));
    ev.live = true;
    const yaml_event_type_t t = ev.e.type;
    if (t == YAML_STREAM_END_EVENT) break;
    if (t == YAML_DOCUMENT_END_EVENT && have_root) break;  // the first document only
    switch (t) {
      case YAML_ALIAS_EVENT:
        return err(ErrorCode::kUnsupported, source, ": YAML aliases are not read (line ", ev.e.start_mark.line + 1, ")");
      case YAML_SCALAR_EVENT: {
        const std::string v(reinterpret_cast<const char*>(ev.e.data.scalar.value), ev.e.data.scalar.length);
        const bool plain = ev.e.data.scalar.style == YAML_PLAIN_SCALAR_STYLE;
        VRUN_RETURN_IF_ERROR(add(plain ? plain_scalar(v) : json(v)));
        break;
      }
      case YAML_SEQUENCE_START_EVENT:
      case YAML_MAPPING_START_EVENT:
        if (stack.size() > 64) return err(ErrorCode::kUnsupported, source, ": YAML nested deeper than 64 levels");
        stack.push_back({t == YAML_MAPPING_START_EVENT ? json::object() : json::array(), t == YAML_MAPPING_START_EVENT, false, {}});
        break;
      case YAML_SEQUENCE_END_EVENT:
      case YAML_MAPPING_END_EVENT: {
        json v = std::move(stack.back().value);
        stack.pop_back();
        VRUN_RETURN_IF_ERROR(add(std::move(v)));
        break;
      }
      default: break;
    }
  }
  if (!have_root) return err(ErrorCode::kInvalidArgument, source, ": empty YAML document");
  return root;
}

}  // namespace vrun::parakeet
