#include "golden_data.h"

#include <gtest/gtest.h>
#include <zlib.h>

#include <fstream>
#include <sstream>

namespace vrun::tok::testing {

std::string data_path(const std::string& name) { return std::string(VRUN_TEST_DATA) + "/tokenizer/" + name; }

std::string read_data(const std::string& name) {
  const std::string path = data_path(name);
  std::string out;
  if (name.size() > 3 && name.compare(name.size() - 3, 3, ".gz") == 0) {
    gzFile f = gzopen(path.c_str(), "rb");
    EXPECT_NE(f, nullptr) << path << ": cannot open";
    if (f == nullptr) return out;
    char buf[1 << 16];
    int n;
    while ((n = gzread(f, buf, sizeof(buf))) > 0) out.append(buf, n);
    EXPECT_GE(n, 0) << path << ": gzip stream is corrupt";
    gzclose(f);
    return out;
  }
  std::ifstream in(path, std::ios::binary);
  EXPECT_TRUE(in.good()) << path << ": cannot open";
  std::stringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

std::vector<std::string> split_lines(const std::string& text) {
  std::vector<std::string> lines;
  size_t pos = 0;
  while (pos < text.size()) {
    size_t nl = text.find('\n', pos);
    if (nl == std::string::npos) nl = text.size();
    lines.push_back(text.substr(pos, nl - pos));
    pos = nl + 1;
  }
  return lines;
}

std::string unescape(const std::string& line) {
  std::string out;
  for (size_t i = 0; i < line.size(); ++i) {
    if (line[i] != '\\') {
      out += line[i];
      continue;
    }
    const char c = line[++i];
    if (c == 'x') {
      out += static_cast<char>(std::stoi(line.substr(i + 1, 2), nullptr, 16));
      i += 2;
    } else {
      out += c == 'n' ? '\n' : c == 'r' ? '\r' : c == 't' ? '\t' : c;
    }
  }
  return out;
}

std::vector<std::string> corpus() {
  std::vector<std::string> cases;
  for (const std::string& line : split_lines(read_data("corpus.txt"))) cases.push_back(unescape(line));
  return cases;
}

std::vector<std::vector<TokenId>> golden_ids(const std::string& name) {
  std::vector<std::vector<TokenId>> rows;
  for (const std::string& line : split_lines(read_data(name))) {
    std::vector<TokenId> ids;
    std::istringstream in(line);
    TokenId id;
    while (in >> id) ids.push_back(id);
    rows.push_back(std::move(ids));
  }
  return rows;
}

std::string show(const std::string& bytes) {
  std::string out;
  for (unsigned char c : bytes) {
    if (c == '\n') {
      out += "\\n";
    } else if (c < 0x20 || c == 0x7f) {
      char buf[8];
      snprintf(buf, sizeof(buf), "\\x%02x", c);
      out += buf;
    } else {
      out += static_cast<char>(c);
    }
  }
  return out;
}

std::string show(const std::vector<TokenId>& ids) {
  std::string out = "[";
  for (size_t i = 0; i < ids.size(); ++i) {
    if (i) out += ' ';
    out += std::to_string(ids[i]);
  }
  return out + "]";
}

}  // namespace vrun::tok::testing
