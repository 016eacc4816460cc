// Normalizers of a tokenizer.json (components.h): BertNormalizer, NFC/NFD/NFKC/NFKD, Lowercase,
// StripAccents, Strip, Replace, Prepend, Precompiled, Nmt and Sequence, each as tokenizers'
// normalizers/*.rs writes its text.
#include <utf8proc.h>

#include <string_view>
#include <unordered_map>

#include <nlohmann/json.hpp>

#include "core/error.h"
#include "data/hf_tokenizer/components.h"
#include "data/hf_tokenizer/regex.h"
#include "data/hf_tokenizer/unicode.h"
#include "data/spm_model.h"

namespace roformer::data::hf {

namespace {

// Keeps the characters `keep` accepts (NormalizedString::filter); a deleted first character moves
// the piece's first byte off its original's.
template <typename Keep>
void filter(Piece& piece, Keep keep) {
  std::string out;
  out.reserve(piece.text.size());
  const std::string& s = piece.text;
  bool kept_any = false;
  for (size_t i = 0; i < s.size();) {
    const size_t at = i;
    const char32_t c = next_char(s, i);
    if (keep(c)) {
      out.append(s, at, i - at);
      kept_any = true;
    } else if (!kept_any) {
      piece.first_aligned = false;
    }
  }
  piece.text.swap(out);
}

// Rewrites the characters `replace` takes: replace(c, its bytes, out) appends what c becomes and
// returns true, or returns false (appending nothing) to keep c. The text is copied only from the
// first rewrite on.
template <typename Replace>
void rewrite(Piece& piece, Replace replace) {
  const std::string& s = piece.text;
  std::string out;
  bool changed = false;
  for (size_t i = 0; i < s.size();) {
    const size_t at = i;
    const char32_t c = next_char(s, i);
    const std::string_view ch(s.data() + at, i - at);
    if (replace(c, ch, out)) {
      if (!changed) out.insert(0, s, 0, at);
      changed = true;
    } else if (changed) {
      out += ch;
    }
  }
  if (changed) piece.text.swap(out);
}

bool is_cjk(char32_t c) {
  return (c >= 0x4E00 && c <= 0x9FFF) || (c >= 0x3400 && c <= 0x4DBF) || (c >= 0x20000 && c <= 0x2A6DF) ||
         (c >= 0x2A700 && c <= 0x2B73F) || (c >= 0x2B740 && c <= 0x2B81F) || (c >= 0x2B920 && c <= 0x2CEAF) ||
         (c >= 0xF900 && c <= 0xFAFF) || (c >= 0x2F800 && c <= 0x2FA1F);
}

void lowercase(Piece& piece) {
  const std::string& s = piece.text;
  bool ascii_lower = true;
  for (const char c : s) ascii_lower &= !(static_cast<unsigned char>(c) >= 0x80 || (c >= 'A' && c <= 'Z'));
  if (ascii_lower) return;
  std::string out;
  out.reserve(s.size());
  for (size_t i = 0; i < s.size();) append_lowercase(out, next_char(s, i));
  piece.text.swap(out);
}

// BertNormalizer (normalizers/bert.rs).
class BertNormalizer : public Normalizer {
 public:
  explicit BertNormalizer(const core::JsonReader& j)
      : clean_text_(j.boolean("clean_text", true)),
        chinese_chars_(j.boolean("handle_chinese_chars", true)),
        lowercase_(j.boolean("lowercase", true)) {
    const bool null_accents = !j.has("strip_accents") || j.at("strip_accents").is_null();
    strip_accents_ = null_accents ? lowercase_ : j.boolean("strip_accents");
  }
  void normalize(Piece& piece) const override {
    if (clean_text_) {
      filter(piece, [](char32_t c) { return !is_removed_by_clean_text(c); });
      // Every whitespace character becomes a space.
      rewrite(piece, [](char32_t c, std::string_view, std::string& out) {
        if (c == ' ' || !is_whitespace(c)) return false;
        out += ' ';
        return true;
      });
    }
    if (chinese_chars_) {
      // A space on each side of every CJK ideograph.
      rewrite(piece, [](char32_t c, std::string_view ch, std::string& out) {
        if (c < 0x3400 || !is_cjk(c)) return false;
        out += ' ';
        out += ch;
        out += ' ';
        return true;
      });
    }
    if (strip_accents_) {
      piece.text = hf::normalize(piece.text, NormalForm::kNfd);
      filter(piece, [](char32_t c) { return !is_mark_nonspacing(c); });
    }
    if (lowercase_) lowercase(piece);
  }

 private:
  bool clean_text_, chinese_chars_, lowercase_, strip_accents_ = false;
};

class UnicodeForm : public Normalizer {
 public:
  explicit UnicodeForm(NormalForm form) : form_(form) {}
  void normalize(Piece& piece) const override { piece.text = hf::normalize(piece.text, form_); }

 private:
  NormalForm form_;
};

class Lowercase : public Normalizer {
 public:
  void normalize(Piece& piece) const override { lowercase(piece); }
};

class StripAccents : public Normalizer {
 public:
  void normalize(Piece& piece) const override {
    filter(piece, [](char32_t c) { return !is_combining_mark(c); });
  }
};

// Strip (normalizers/strip.rs): leading and/or trailing whitespace (char::is_whitespace).
class Strip : public Normalizer {
 public:
  explicit Strip(const core::JsonReader& j) : left_(j.boolean("strip_left")), right_(j.boolean("strip_right")) {}
  void normalize(Piece& piece) const override {
    std::string& s = piece.text;
    size_t begin = 0, end = s.size();
    if (left_)
      for (size_t i = 0; i < s.size() && is_whitespace(next_char(s, i));) begin = i;
    if (right_)
      while (end > begin) {
        const size_t n = last_char_length(std::string_view(s).substr(0, end));
        if (!is_whitespace(first_char(std::string_view(s).substr(end - n, n)))) break;
        end -= n;
      }
    if (begin > 0) piece.first_aligned = false;
    if (begin > 0 || end < s.size()) s = s.substr(begin, end - begin);
  }

 private:
  bool left_, right_;
};

// Replace (normalizers/replace.rs, NormalizedString::replace).
class Replace : public Normalizer {
 public:
  explicit Replace(const core::JsonReader& j)
      : pattern_(parse_pattern(j, "pattern")), content_(j.string("content")) {}
  void normalize(Piece& piece) const override {
    thread_local std::vector<std::pair<size_t, size_t>> found;
    const std::string& s = piece.text;
    if (s.empty()) return;
    pattern_->find_all(s, found);
    if (found.empty()) return;
    // A match at the start: the content takes the place of its last character (an empty match's
    // content is inserted before the first); deleted or replacing more than one character, the
    // first byte no longer comes from the original's first.
    if (found[0].first == 0 && found[0].second > 0) {
      const bool one_char = utf8_length(static_cast<uint8_t>(s[0])) == found[0].second;
      if (content_.empty() || !one_char) piece.first_aligned = false;
    }
    std::string out;
    out.reserve(s.size());
    size_t last = 0;
    for (const auto& [start, end] : found) {
      out.append(s, last, start - last);
      out += content_;
      last = end;
    }
    out.append(s, last, std::string::npos);
    piece.text.swap(out);
  }

 private:
  std::unique_ptr<Regex> pattern_;
  std::string content_;
};

class Prepend : public Normalizer {
 public:
  explicit Prepend(const core::JsonReader& j) : prepend_(j.string("prepend")) {}
  void normalize(Piece& piece) const override {
    if (!piece.text.empty()) piece.text.insert(0, prepend_);
  }

 private:
  std::string prepend_;
};

// Nmt (normalizers/unicode.rs): some controls deleted, some spaces made " ".
class Nmt : public Normalizer {
 public:
  void normalize(Piece& piece) const override {
    filter(piece, [](char32_t c) {
      return !((c >= 0x01 && c <= 0x08) || c == 0x0B || (c >= 0x0E && c <= 0x1F) || c == 0x7F || c == 0x8F || c == 0x9F);
    });
    std::string out;
    const std::string& s = piece.text;
    for (size_t i = 0; i < s.size();) {
      const size_t at = i;
      const char32_t c = next_char(s, i);
      const bool space = c == 0x09 || c == 0x0A || c == 0x0C || c == 0x0D || c == 0x1680 || (c >= 0x200B && c <= 0x200F) ||
                         c == 0x2028 || c == 0x2029 || c == 0x2581 || c == 0xFEFF || c == 0xFFFD;
      if (space) out += ' ';
      else out.append(s, at, i - at);
    }
    piece.text.swap(out);
  }
};

std::string base64_decode(const std::string& text) {
  std::string out;
  uint32_t buffer = 0;
  int bits = 0;
  for (const char c : text) {
    int v;
    if (c >= 'A' && c <= 'Z') v = c - 'A';
    else if (c >= 'a' && c <= 'z') v = c - 'a' + 26;
    else if (c >= '0' && c <= '9') v = c - '0' + 52;
    else if (c == '+') v = 62;
    else if (c == '/') v = 63;
    else if (c == '=') break;
    else throw Error("not base64");
    buffer = (buffer << 6) | static_cast<uint32_t>(v);
    bits += 6;
    if (bits >= 8) {
      bits -= 8;
      out += static_cast<char>((buffer >> bits) & 0xFF);
    }
  }
  return out;
}

// Precompiled (normalizers/precompiled.rs with the spm_precompiled crate): SentencePiece's
// normalization table applied per grapheme cluster. A cluster under 6 bytes that begins with a rule's
// key becomes that rule's replacement whole (the shortest such key); any other cluster is mapped
// character by character.
class Precompiled : public Normalizer {
 public:
  explicit Precompiled(const core::JsonReader& j) {
    if (j.at("precompiled_charsmap").is_null()) return;
    std::string charsmap;
    try {
      charsmap = base64_decode(j.string("precompiled_charsmap"));
    } catch (const Error&) {
      j.wrong("precompiled_charsmap", "a base64 SentencePiece normalization table");
    }
    const bool ok = for_each_charsmap_rule(charsmap, [&](std::string_view key, std::string_view replacement) {
      rules_.emplace(std::string(key), std::string(replacement));
      longest_key_ = std::max(longest_key_, key.size());
    });
    if (!ok) j.wrong("precompiled_charsmap", "a SentencePiece normalization table (this one is damaged)");
  }
  void normalize(Piece& piece) const override {
    if (rules_.empty()) return;
    const std::string& s = piece.text;
    std::string out;
    out.reserve(s.size());
    bool modified = false;
    utf8proc_int32_t state = 0;
    size_t cluster = 0;
    char32_t previous = 0;
    auto flush = [&](size_t end) {
      const std::string_view g(s.data() + cluster, end - cluster);
      if (g.size() < 6)
        if (const std::string* r = transform(g)) {
          out += *r;
          modified = true;
          return;
        }
      for (size_t i = 0; i < g.size();) {
        const size_t at = i;
        next_char(g, i);
        if (const std::string* r = rule(g.substr(at, i - at))) {
          out += *r;
          modified = true;
        } else {
          out.append(g.substr(at, i - at));
        }
      }
    };
    for (size_t i = 0; i < s.size();) {
      const size_t at = i;
      const char32_t c = next_char(s, i);
      if (at > 0 && utf8proc_grapheme_break_stateful(static_cast<utf8proc_int32_t>(previous),
                                                     static_cast<utf8proc_int32_t>(c), &state)) {
        flush(at);
        cluster = at;
      }
      previous = c;
    }
    if (!s.empty()) flush(s.size());
    if (modified) piece.text.swap(out);
  }

 private:
  const std::string* rule(std::string_view key) const {
    if (key.size() > longest_key_) return nullptr;
    const auto it = rules_.find(std::string(key));
    return it == rules_.end() ? nullptr : &it->second;
  }
  // The replacement of the shortest key that `chunk` begins with.
  const std::string* transform(std::string_view chunk) const {
    for (size_t i = 0; i < chunk.size();) {
      next_char(chunk, i);
      if (const std::string* r = rule(chunk.substr(0, i))) return r;
    }
    return nullptr;
  }
  std::unordered_map<std::string, std::string> rules_;
  size_t longest_key_ = 0;
};

class Sequence : public Normalizer {
 public:
  explicit Sequence(const core::JsonReader& j) {
    for (const core::JsonReader& step : j.objects("normalizers")) steps_.push_back(parse_normalizer(step));
  }
  void normalize(Piece& piece) const override {
    for (const auto& step : steps_) step->normalize(piece);
  }

 private:
  std::vector<std::unique_ptr<Normalizer>> steps_;
};

}  // namespace

std::unique_ptr<Regex> parse_pattern(const core::JsonReader& j, const std::string& key) {
  const core::JsonReader p = j.object(key);
  if (!p.has("String") && !p.has("Regex")) j.wrong(key, "{\"String\": ...} or {\"Regex\": ...}");
  try {
    return std::make_unique<Regex>(p.has("String") ? escape_regex(p.string("String")) : p.string("Regex"));
  } catch (const Error& e) {
    j.wrong(key, std::string("a pattern roformer can match (") + e.what() + ")");
  }
}

std::unique_ptr<Normalizer> parse_normalizer(const core::JsonReader& j) {
  enum { kBert, kNfc, kNfd, kNfkc, kNfkd, kLowercase, kStripAccents, kStrip, kReplace, kPrepend, kPrecompiled, kNmt,
         kSequence };
  switch (one_of(j, "type", {"BertNormalizer", "NFC", "NFD", "NFKC", "NFKD", "Lowercase", "StripAccents", "Strip",
                             "Replace", "Prepend", "Precompiled", "Nmt", "Sequence"})) {
    case kBert: return std::make_unique<BertNormalizer>(j);
    case kNfc: return std::make_unique<UnicodeForm>(NormalForm::kNfc);
    case kNfd: return std::make_unique<UnicodeForm>(NormalForm::kNfd);
    case kNfkc: return std::make_unique<UnicodeForm>(NormalForm::kNfkc);
    case kNfkd: return std::make_unique<UnicodeForm>(NormalForm::kNfkd);
    case kLowercase: return std::make_unique<Lowercase>();
    case kStripAccents: return std::make_unique<StripAccents>();
    case kStrip: return std::make_unique<Strip>(j);
    case kReplace: return std::make_unique<Replace>(j);
    case kPrepend: return std::make_unique<Prepend>(j);
    case kPrecompiled: return std::make_unique<Precompiled>(j);
    case kNmt: return std::make_unique<Nmt>();
    default: return std::make_unique<Sequence>(j);
  }
}

}  // namespace roformer::data::hf
