// Oniguruma-syntax patterns on PCRE2 (regex.h).
#define PCRE2_CODE_UNIT_WIDTH 8
#include "data/hf_tokenizer/regex.h"

#include <pcre2.h>

#include <cctype>
#include <cstdio>
#include <initializer_list>

#include "core/error.h"
#include "data/hf_tokenizer/unicode.h"
#include "data/hf_tokenizer/unicode_tables.h"

namespace roformer::data::hf {

namespace {

std::string to_hex(char32_t c) {
  char buffer[16];
  std::snprintf(buffer, sizeof(buffer), "%x", static_cast<unsigned>(c));
  return buffer;
}

std::string pcre2_message(int code) {
  PCRE2_UCHAR buffer[256];
  pcre2_get_error_message(code, buffer, sizeof(buffer));
  return reinterpret_cast<const char*>(buffer);
}

bool is_hex(char c) { return std::isxdigit(static_cast<unsigned char>(c)) != 0; }

// " \x{a}-\x{b}" for every character PCRE2's Unicode (14.0) does not assign and Oniguruma puts in
// one of the general categories `categories` ("L" a whole class, "Lu" one category).
std::string newer_members(std::initializer_list<std::string_view> categories) {
  std::string out;
  for (size_t k = 0; k < tables::kNewCategoriesSize; ++k) {
    const tables::NewCategory& r = tables::kNewCategories[k];
    const std::string_view category(r.category);
    bool member = false;
    for (const std::string_view c : categories) member |= c.size() == 1 ? category[0] == c[0] : category == c;
    if (!member) continue;
    out += "\\x{" + to_hex(r.first) + "}";
    if (r.last != r.first) out += "-\\x{" + to_hex(r.last) + "}";
  }
  return out;
}

// Oniguruma's \w (Rust regex's, a few Latin-1 numbers more and the joiners less), as class ranges.
const std::string& onig_word_class() {
  static const std::string members = [] {
    std::string out;
    auto add = [&](char32_t a, char32_t b) {
      out += "\\x{" + to_hex(a) + "}";
      if (b != a) out += "-\\x{" + to_hex(b) + "}";
    };
    for (size_t k = 0; k < tables::kOnigWordAddedSize; ++k) add(tables::kOnigWordAdded[k].first, tables::kOnigWordAdded[k].last);
    for (size_t k = 0; k < tables::kWordSize; ++k) {
      char32_t a = tables::kWord[k].first;
      const char32_t b = tables::kWord[k].last;
      for (size_t r = 0; r < tables::kOnigWordRemovedSize; ++r) {
        const tables::Range& gone = tables::kOnigWordRemoved[r];
        if (gone.last < a || gone.first > b) continue;
        if (gone.first > a) add(a, gone.first - 1);
        a = gone.last + 1;
      }
      if (a <= b) add(a, b);
    }
    return out;
  }();
  return members;
}

// Oniguruma's \s: the White_Space characters (PCRE2's \s also takes U+180E).
constexpr const char* kSpaceClass = "\\t\\n\\x0b\\f\\r\\x20\\x{85}\\x{a0}\\x{1680}\\x{2000}-\\x{200a}\\x{2028}\\x{2029}"
                                    "\\x{202f}\\x{205f}\\x{3000}";

// What one escape means in Oniguruma, as the inside of a PCRE2 character class, or "" when PCRE2
// reads the escape alike. `negated` is set for the upper-case forms (\S, \D, \W, \P{..}).
std::string class_of_escape(const std::string& p, size_t& i, bool& negated) {
  const char e = p[i];
  negated = std::isupper(static_cast<unsigned char>(e)) != 0;
  switch (e) {
    case 's': case 'S': return kSpaceClass;
    case 'd': case 'D': return "\\p{Nd}" + newer_members({"Nd"});
    case 'w': case 'W': return onig_word_class();
    case 'h': case 'H': return "0-9a-fA-F";  // a hexadecimal digit in Ruby syntax
    case 'p': case 'P': {
      const size_t close = p.find('}', i);
      if (i + 1 >= p.size() || p[i + 1] != '{' || close == std::string::npos) return "";
      std::string name = p.substr(i + 2, close - i - 2);
      if (!name.empty() && name[0] == '^') {
        negated = !negated;
        name.erase(0, 1);
      }
      const bool category = (name.size() == 1 && std::string("LMNPSZC").find(name[0]) != std::string::npos) ||
                            (name.size() == 2 && std::isupper(static_cast<unsigned char>(name[0])) &&
                             std::islower(static_cast<unsigned char>(name[1])));
      if (!category) return "";  // a script or another property: PCRE2 reads it alike
      i = close;
      return "\\p{" + name + "}" + newer_members({name});
    }
    default: return "";
  }
}

// The pattern in PCRE2's syntax with Oniguruma's meanings: the classes of \s \d \w \h and \p{..}
// as Oniguruma's Unicode has them, \uHHHH as \x{HHHH}. Throws roformer::Error for what cannot be
// carried over exactly (nested classes and && intersections, a negated class escape inside a
// class, word boundaries).
std::string to_pcre2(const std::string& p) {
  std::string out;
  out.reserve(p.size() + 16);
  bool in_class = false;
  for (size_t i = 0; i < p.size(); ++i) {
    const char c = p[i];
    if (c == '[') {
      if (in_class && p.compare(i, 2, "[:") == 0) {  // a POSIX class [:alpha:]
        const size_t end = p.find(":]", i);
        if (end == std::string::npos) throw Error("an unterminated POSIX class");
        out.append(p, i, end + 2 - i);
        i = end + 1;
        continue;
      }
      if (in_class) throw Error("a character class inside a character class");
      in_class = true;
      out += c;
      if (i + 1 < p.size() && p[i + 1] == '^') out += p[++i];
      if (i + 1 < p.size() && p[i + 1] == ']') out += p[++i];  // a ']' first in a class is literal
      continue;
    }
    if (c == ']' && in_class) in_class = false;
    if (c == '&' && in_class && i + 1 < p.size() && p[i + 1] == '&')
      throw Error("a class intersection (&&)");
    if (c != '\\' || i + 1 == p.size()) {
      out += c;
      continue;
    }
    const char e = p[++i];
    if (e == 'b' || e == 'B') throw Error(std::string("a word boundary (\\") + e + ")");
    if (e == 'u' && i + 4 < p.size() && is_hex(p[i + 1]) && is_hex(p[i + 2]) && is_hex(p[i + 3]) && is_hex(p[i + 4])) {
      out += "\\x{" + p.substr(i + 1, 4) + "}";
      i += 4;
      continue;
    }
    bool negated = false;
    const std::string members = class_of_escape(p, i, negated);
    if (members.empty()) {
      out += '\\';
      out += e;
    } else if (!in_class) {
      out += (negated ? "[^" : "[") + members + "]";
    } else if (negated) {
      throw Error(std::string("\\") + e + " inside a character class");
    } else {
      out += members;
    }
  }
  return out;
}

}  // namespace

struct Regex::Compiled {
  pcre2_code* code = nullptr;
  ~Compiled() {
    if (code) pcre2_code_free(code);
  }
};

Regex::Regex(const std::string& pattern) : pattern_(pattern), compiled_(new Compiled) {
  std::string translated;
  try {
    translated = to_pcre2(pattern);
  } catch (const Error& e) {
    throw Error(std::string("it uses ") + e.what() + ", which roformer cannot match the way tokenizers' Oniguruma does");
  }
  int code = 0;
  PCRE2_SIZE offset = 0;
  compiled_->code = pcre2_compile(reinterpret_cast<PCRE2_SPTR>(translated.data()), translated.size(),
                                  PCRE2_UTF | PCRE2_UCP | PCRE2_NO_UTF_CHECK, &code, &offset, nullptr);
  if (!compiled_->code)
    throw Error("PCRE2 cannot compile it (" + pcre2_message(code) + " at offset " + std::to_string(offset) + ")");
  pcre2_jit_compile(compiled_->code, PCRE2_JIT_COMPLETE);  // without JIT (not available) it still matches
}

Regex::~Regex() = default;

namespace {

// Per thread: the match data and a JIT stack large enough for long runs of one class (\s+(?!\S)
// over a page of spaces).
struct MatchScratch {
  pcre2_match_data* data = pcre2_match_data_create(1, nullptr);
  pcre2_match_context* context = pcre2_match_context_create(nullptr);
  pcre2_jit_stack* stack = pcre2_jit_stack_create(32 * 1024, 8 * 1024 * 1024, nullptr);
  MatchScratch() { pcre2_jit_stack_assign(context, nullptr, stack); }
  ~MatchScratch() {
    pcre2_jit_stack_free(stack);
    pcre2_match_context_free(context);
    pcre2_match_data_free(data);
  }
};

}  // namespace

void Regex::find_all(std::string_view text, std::vector<std::pair<size_t, size_t>>& matches) const {
  thread_local MatchScratch scratch;
  matches.clear();
  const auto* subject = reinterpret_cast<PCRE2_SPTR>(text.data());
  size_t last_end = 0;
  bool have_last_match = false;
  size_t last_match_end = 0;
  // The onig crate's FindMatches: search from last_end; an empty match when last_end is where the
  // previous match ended is skipped by moving one character on.
  while (last_end <= text.size()) {
    const int rc = pcre2_match(compiled_->code, subject, text.size(), last_end, PCRE2_NO_UTF_CHECK, scratch.data,
                               scratch.context);
    if (rc == PCRE2_ERROR_NOMATCH) break;
    if (rc < 0) throw Error("regular expression /" + pattern_ + "/ failed on a text: " + pcre2_message(rc));
    const PCRE2_SIZE* ovector = pcre2_get_ovector_pointer(scratch.data);
    const size_t start = ovector[0], end = ovector[1];
    if (start == end && have_last_match && last_end == last_match_end) {
      last_end += last_end < text.size() ? utf8_length(static_cast<uint8_t>(text[last_end])) : 1;
      continue;
    }
    last_end = end;
    last_match_end = end;
    have_last_match = true;
    matches.emplace_back(start, end);
  }
}

std::string escape_regex(const std::string& literal) {
  std::string out;
  for (const char c : literal) {
    if (std::ispunct(static_cast<unsigned char>(c)) || c == ' ') out += '\\';
    out += c;
  }
  return out;
}

}  // namespace roformer::data::hf
