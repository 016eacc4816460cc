// Pre-tokenizers of a tokenizer.json (components.h): BertPreTokenizer, ByteLevel, Split, Metaspace,
// WhitespaceSplit, Whitespace, Punctuation, Digits, CharDelimiterSplit and Sequence, each as
// tokenizers' pre_tokenizers/*.rs cuts its pieces.
#include <nlohmann/json.hpp>

#include "core/error.h"
#include "data/hf_tokenizer/byte_level.h"
#include "data/hf_tokenizer/components.h"
#include "data/hf_tokenizer/regex.h"
#include "data/hf_tokenizer/unicode.h"

namespace roformer::data::hf {

namespace {

SplitBehavior parse_behavior(const core::JsonReader& j, const std::string& key) {
  return static_cast<SplitBehavior>(
      one_of(j, key, {"Removed", "Isolated", "MergedWithPrevious", "MergedWithNext", "Contiguous"}));
}

// Splits every piece at the characters `is_delimiter` accepts.
template <typename Predicate>
void split_at_chars(std::vector<Piece>& pieces, Predicate is_delimiter, SplitBehavior behavior) {
  thread_local std::vector<Match> matches;
  split_each(pieces, [&](Piece& p, std::vector<Piece>& out) {
    cover_chars(p.text, is_delimiter, matches);
    split_piece(p, matches, behavior, out);
  });
}

class BertPreTokenizer : public PreTokenizer {
 public:
  void pre_tokenize(std::vector<Piece>& pieces) const override {
    split_at_chars(pieces, is_whitespace, SplitBehavior::kRemoved);
    split_at_chars(pieces, is_punctuation, SplitBehavior::kIsolated);
  }
};

class WhitespaceSplit : public PreTokenizer {
 public:
  void pre_tokenize(std::vector<Piece>& pieces) const override {
    split_at_chars(pieces, is_whitespace, SplitBehavior::kRemoved);
  }
};

// Whitespace (pre_tokenizers/whitespace.rs): the runs of \w+ and of [^\w\s]+ (Rust regex), the
// whitespace between them dropped.
class Whitespace : public PreTokenizer {
 public:
  void pre_tokenize(std::vector<Piece>& pieces) const override {
    thread_local std::vector<Match> matches;
    split_each(pieces, [&](Piece& p, std::vector<Piece>& out) {
      matches.clear();
      const std::string& s = p.text;
      size_t run = 0;
      int kind = -1;  // of the run under way: 0 word, 1 other, 2 space
      for (size_t i = 0; i < s.size();) {
        const size_t at = i;
        const char32_t c = next_char(s, i);
        const int k = is_word_char(c) ? 0 : is_whitespace(c) ? 2 : 1;
        if (k != kind || k == 2) {
          if (kind >= 0) matches.push_back({run, at, kind == 2});
          run = at;
          kind = k;
        }
      }
      if (kind >= 0) matches.push_back({run, s.size(), kind == 2});
      if (matches.empty()) matches.push_back({0, 0, false});
      split_piece(p, matches, SplitBehavior::kRemoved, out);
    });
  }
};

class Punctuation : public PreTokenizer {
 public:
  explicit Punctuation(const core::JsonReader& j)
      : behavior_(j.has("behavior") ? parse_behavior(j, "behavior") : SplitBehavior::kIsolated) {}
  void pre_tokenize(std::vector<Piece>& pieces) const override {
    split_at_chars(pieces, is_punctuation, behavior_);
  }

 private:
  SplitBehavior behavior_;
};

class Digits : public PreTokenizer {
 public:
  explicit Digits(const core::JsonReader& j) : individual_(j.boolean("individual_digits", false)) {}
  void pre_tokenize(std::vector<Piece>& pieces) const override {
    split_at_chars(pieces, is_numeric, individual_ ? SplitBehavior::kIsolated : SplitBehavior::kContiguous);
  }

 private:
  bool individual_;
};

class CharDelimiterSplit : public PreTokenizer {
 public:
  explicit CharDelimiterSplit(const core::JsonReader& j) {
    const std::string d = j.string("delimiter");
    if (d.empty() || utf8_length(static_cast<uint8_t>(d[0])) != d.size()) j.wrong("delimiter", "one character");
    delimiter_ = first_char(d);
  }
  void pre_tokenize(std::vector<Piece>& pieces) const override {
    const char32_t d = delimiter_;
    split_at_chars(pieces, [d](char32_t c) { return c == d; }, SplitBehavior::kRemoved);
  }

 private:
  char32_t delimiter_ = 0;
};

class Split : public PreTokenizer {
 public:
  explicit Split(const core::JsonReader& j)
      : pattern_(parse_pattern(j, "pattern")),
        behavior_(parse_behavior(j, "behavior")),
        invert_(j.boolean("invert", false)) {}
  void pre_tokenize(std::vector<Piece>& pieces) const override {
    thread_local std::vector<std::pair<size_t, size_t>> found;
    thread_local std::vector<Match> matches;
    split_each(pieces, [&](Piece& p, std::vector<Piece>& out) {
      pattern_->find_all(p.text, found);
      cover(p.text, found, matches);
      if (invert_)
        for (Match& m : matches) m.is_match = !m.is_match;
      split_piece(p, matches, behavior_, out);
    });
  }

 private:
  std::unique_ptr<Regex> pattern_;
  SplitBehavior behavior_;
  bool invert_;
};

// ByteLevel (pre_tokenizers/byte_level.rs): a space before every piece (add_prefix_space), GPT-2's
// split (use_regex), then every byte written as its printable character.
class ByteLevel : public PreTokenizer {
 public:
  explicit ByteLevel(const core::JsonReader& j)
      : add_prefix_space_(j.boolean("add_prefix_space", true)), use_regex_(j.boolean("use_regex", true)) {
    j.boolean("trim_offsets", true);  // offsets only
  }
  void pre_tokenize(std::vector<Piece>& pieces) const override {
    thread_local std::vector<std::pair<size_t, size_t>> found;
    thread_local std::vector<Match> matches;
    split_each(pieces, [&](Piece& p, std::vector<Piece>& out) {
      if (add_prefix_space_ && (p.text.empty() || p.text[0] != ' ')) p.text.insert(0, 1, ' ');
      if (!use_regex_) {
        if (!p.text.empty()) out.push_back(std::move(p));
        return;
      }
      gpt2_pattern().find_all(p.text, found);
      cover(p.text, found, matches);
      split_piece(p, matches, SplitBehavior::kIsolated, out);
    });
    for (Piece& p : pieces)
      if (p.token < 0) p.text = bytes_to_chars(p.text);
  }
  std::string word_start_mark() const override { return bytes_to_chars(" "); }

 private:
  bool add_prefix_space_, use_regex_;
};

// Metaspace (pre_tokenizers/metaspace.rs): spaces become the replacement character, which is put
// before a piece (prepend_scheme) and cut it into words (split).
class Metaspace : public PreTokenizer {
 public:
  explicit Metaspace(const core::JsonReader& j) : replacement_(j.string("replacement")), split_(j.boolean("split", true)) {
    if (replacement_.empty() || utf8_length(static_cast<uint8_t>(replacement_[0])) != replacement_.size())
      j.wrong("replacement", "one character");
    scheme_ = j.has("prepend_scheme") ? static_cast<Scheme>(one_of(j, "prepend_scheme", {"first", "never", "always"}))
                                      : kAlways;
    // A legacy add_prefix_space false must come with prepend_scheme "never" (tokenizers refuses
    // the file otherwise).
    if (j.has("add_prefix_space") && !j.at("add_prefix_space").is_null() && !j.boolean("add_prefix_space") &&
        scheme_ != kNever)
      j.wrong("add_prefix_space", "true or absent unless prepend_scheme is \"never\"");
  }
  void pre_tokenize(std::vector<Piece>& pieces) const override {
    thread_local std::vector<Match> matches;
    const char32_t mark = first_char(replacement_);
    split_each(pieces, [&](Piece& p, std::vector<Piece>& out) {
      std::string& s = p.text;
      if (s.find(' ') != std::string::npos) {
        std::string replaced;
        replaced.reserve(s.size() + s.size() / 2);
        for (const char c : s) {
          if (c == ' ') replaced += replacement_;
          else replaced += c;
        }
        s.swap(replaced);
      }
      const bool starts = s.compare(0, replacement_.size(), replacement_) == 0;
      if (!starts && !s.empty() && (scheme_ == kAlways || (scheme_ == kFirst && p.at_start))) s.insert(0, replacement_);
      if (!split_) {
        if (!s.empty()) out.push_back(std::move(p));
        return;
      }
      cover_chars(s, [mark](char32_t c) { return c == mark; }, matches);
      split_piece(p, matches, SplitBehavior::kMergedWithNext, out);
    });
  }
  std::string word_start_mark() const override { return replacement_; }

 private:
  enum Scheme { kFirst, kNever, kAlways };
  std::string replacement_;
  bool split_;
  Scheme scheme_ = kAlways;
};

class Sequence : public PreTokenizer {
 public:
  explicit Sequence(const core::JsonReader& j) {
    for (const core::JsonReader& step : j.objects("pretokenizers")) steps_.push_back(parse_pre_tokenizer(step));
  }
  void pre_tokenize(std::vector<Piece>& pieces) const override {
    for (const auto& step : steps_) step->pre_tokenize(pieces);
  }
  std::string word_start_mark() const override {
    for (const auto& step : steps_)
      if (std::string mark = step->word_start_mark(); !mark.empty()) return mark;
    return "";
  }

 private:
  std::vector<std::unique_ptr<PreTokenizer>> steps_;
};

}  // namespace

std::unique_ptr<PreTokenizer> parse_pre_tokenizer(const core::JsonReader& j) {
  enum { kBert, kByteLevel, kSplit, kMetaspace, kWhitespaceSplit, kWhitespace, kPunctuation, kDigits, kCharDelimiter,
         kSequence };
  switch (one_of(j, "type", {"BertPreTokenizer", "ByteLevel", "Split", "Metaspace", "WhitespaceSplit", "Whitespace",
                             "Punctuation", "Digits", "CharDelimiterSplit", "Sequence"})) {
    case kBert: return std::make_unique<BertPreTokenizer>();
    case kByteLevel: return std::make_unique<ByteLevel>(j);
    case kSplit: return std::make_unique<Split>(j);
    case kMetaspace: return std::make_unique<Metaspace>(j);
    case kWhitespaceSplit: return std::make_unique<WhitespaceSplit>();
    case kWhitespace: return std::make_unique<Whitespace>();
    case kPunctuation: return std::make_unique<Punctuation>(j);
    case kDigits: return std::make_unique<Digits>(j);
    case kCharDelimiter: return std::make_unique<CharDelimiterSplit>(j);
    default: return std::make_unique<Sequence>(j);
  }
}

}  // namespace roformer::data::hf
