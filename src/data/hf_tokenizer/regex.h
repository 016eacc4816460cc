// The regular expressions of a tokenizer.json (Split, Replace, ByteLevel's GPT-2 pattern), run by
// PCRE2 with Unicode properties where `tokenizers` runs Oniguruma. The pattern is written for
// Oniguruma's Ruby syntax; what PCRE2 reads otherwise is rewritten first (\h is a hex digit there,
// \uHHHH a code point), and the matches are found the way the onig crate's find_iter finds them
// (an empty match right after the previous match is skipped).
#pragma once

#include <memory>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

namespace roformer::data::hf {

class Regex {
 public:
  // Throws roformer::Error saying why when the pattern uses what PCRE2 cannot match as Oniguruma
  // does, or when PCRE2 cannot compile it.
  explicit Regex(const std::string& pattern);
  ~Regex();
  Regex(const Regex&) = delete;
  Regex& operator=(const Regex&) = delete;

  // The [start, end) byte ranges of the matches in `text` (valid UTF-8), in order.
  void find_all(std::string_view text, std::vector<std::pair<size_t, size_t>>& matches) const;
  const std::string& pattern() const { return pattern_; }

 private:
  struct Compiled;
  std::string pattern_;
  std::unique_ptr<Compiled> compiled_;
};

// An Oniguruma pattern that matches `literal` exactly (tokenizers' regex::escape of a String pattern).
std::string escape_regex(const std::string& literal);

}  // namespace roformer::data::hf
