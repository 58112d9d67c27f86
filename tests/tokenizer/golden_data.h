// Reading the tokenizer goldens of tests/data/tokenizer (made by
// tests/reference/make_tokenizer_goldens.py).
#pragma once

#include <string>
#include <vector>

#include "apps/common/tokenizer/tokenizer.h"

namespace vrun::tok::testing {

std::string data_path(const std::string& name);
// Whole file, gunzipped when the name ends in .gz; fails the test (and returns "") if absent.
std::string read_data(const std::string& name);
std::vector<std::string> split_lines(const std::string& text);
// Undoes the corpus escaping (\n \r \t \\ \xNN).
std::string unescape(const std::string& line);
std::vector<std::string> corpus();
std::vector<std::vector<TokenId>> golden_ids(const std::string& name);
// Printable form of a case for failure messages.
std::string show(const std::string& bytes);
std::string show(const std::vector<TokenId>& ids);

}  // namespace vrun::tok::testing
