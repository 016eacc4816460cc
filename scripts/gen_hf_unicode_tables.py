#!/usr/bin/env python3
"""Writes src/data/hf_tokenizer/unicode_tables.cpp: the Unicode answers of Hugging Face `tokenizers`.

usage: $(bash scripts/setup.sh venv)/bin/python scripts/gen_hf_unicode_tables.py [OUT.cpp]

`tokenizers` answers Unicode questions with tables of several ages: Rust's char methods (lowercase,
is_numeric) the Unicode of its compiler, the unicode_categories and unicode-normalization crates
older ones, Oniguruma (its regular expressions) its own. roformer's tokenizer.json reader uses
utf8proc and PCRE2 from Debian, of yet other ages. This script asks the installed `tokenizers`
itself, character by character, and writes what the reader needs:

  kPunctuation, kNumeric, kCleanTextRemoved, kNonspacingMarks, kCombiningMarks
      the characters each test of a normalizer or pre-tokenizer selects (Punctuation and
      BertPreTokenizer, Digits, BertNormalizer's clean_text, its strip_accents after NFD, StripAccents)
  kLowercase      runs of Rust's char::to_lowercase (every character it changes)
  kWord           Rust regex's \\w; kOnigWordAdded, kOnigWordRemoved: Oniguruma's \\w differs in these
  kNewCategories  characters Python's unicodedata (Unicode 14.0, PCRE2 10.42's age) does not know
                  and Oniguruma does, with their general category: the regex rewrites \\p{..}, \\d
                  and \\w to include them
  kNotDecomposed  characters unicode-normalization leaves as they are while Unicode 14.0 (and so
                  utf8proc) decomposes them, and every character newer than 14.0

tests/integration/test_hf_tokenizer_reader.cpp checks every code point of planes 0-3 and 14 against
`tokenizers` again (IdsAreThoseOfTokenizers).
"""
import os
import sys
import unicodedata

import tokenizers
from tokenizers import Regex
from tokenizers import normalizers as N
from tokenizers import pre_tokenizers as P

CODE_POINTS = [c for c in range(0x110000) if not 0xD800 <= c <= 0xDFFF]
CATEGORIES = ["Lu", "Ll", "Lt", "Lm", "Lo", "Mn", "Mc", "Me", "Nd", "Nl", "No", "Pc", "Pd", "Ps", "Pe", "Pi",
              "Pf", "Po", "Sm", "Sc", "Sk", "So", "Zs", "Zl", "Zp", "Cc", "Cf", "Cs", "Co"]


def isolated_by(pre_tokenizer, chars):
    """The characters of `chars` that `pre_tokenizer` splits off alone when each stands between a's."""
    found = set()
    for i in range(0, len(chars), 4096):
        block = chars[i:i + 4096]
        text = "".join("a" + chr(c) for c in block) + "a"
        for piece, _ in pre_tokenizer.pre_tokenize_str(text):
            if len(piece) == 1 and piece != "a":
                found.add(ord(piece))
    return found


def matched_by(pattern, chars):
    """The characters of `chars` that the regular expression (one character class) matches."""
    split = P.Split(Regex(pattern), behavior="removed")
    found = set()
    for i in range(0, len(chars), 4096):
        block = chars[i:i + 4096]
        kept = {ord(c) for piece, _ in split.pre_tokenize_str("".join(map(chr, block))) for c in piece}
        found |= set(block) - kept
    return found


def word_chars(chars):
    """Rust regex's \\w: the characters the Whitespace pre-tokenizer keeps together with letters."""
    found = set()
    for i in range(0, len(chars), 4096):
        block = chars[i:i + 4096]
        text = "".join("a" + chr(c) for c in block) + "a"
        for piece, _ in P.Whitespace().pre_tokenize_str(text):
            if "a" in piece:
                found |= {ord(ch) for ch in piece if ch != "a"}
    return found | {ord("a")}


def changed_by(normalizer, chars):
    return {c: normalizer.normalize_str(chr(c)) for c in chars if normalizer.normalize_str(chr(c)) != chr(c)}


def ranges(chars):
    out = []
    for c in sorted(chars):
        if out and out[-1][1] == c - 1:
            out[-1][1] = c
        else:
            out.append([c, c])
    return out


def c_array(comment, type_name, name, items):
    """A C++ array `type_name name[]` of the items, lines wrapped before 118 columns, and its size."""
    lines = [comment, f"const {type_name} {name}[] = {{"]
    line = "   "
    for item in items:
        if len(line) + len(item) + 2 > 118:
            lines.append(line)
            line = "   "
        line += f" {item},"
    lines.append(line)
    lines.append("};")
    lines.append(f"const size_t {name}Size = {len(items)};")
    return "\n".join(lines)


def range_table(name, comment, chars):
    rows = ranges(chars)
    return c_array(f"// {comment} ({len(chars)} characters)", "Range", name,
                   [f"{{0x{a:x}, 0x{b:x}}}" for a, b in rows])


def lowercase_runs(mapping):
    """Runs (first, last, stride, delta): every stride-th character of [first, last] maps to c + delta."""
    runs = []
    for c in sorted(mapping):
        lower = mapping[c]
        if len(lower) != 1:
            continue  # U+0130 is handled in unicode.cpp (two characters)
        delta = ord(lower) - c
        if runs:
            first, last, stride, d = runs[-1]
            if d == delta and ((stride == 0 and c - last in (1, 2)) or (stride and c - last == stride)):
                runs[-1] = [first, c, c - last if stride == 0 else stride, d]
                continue
        runs.append([c, c, 0, delta])
    return c_array(f"// Rust's char::to_lowercase, as runs {{first, last, stride, delta}} ({len(runs)} runs)",
                   "LowerRun", "kLowercase",
                   [f"{{0x{first:x}, 0x{last:x}, {max(stride, 1)}, {delta}}}" for first, last, stride, delta in runs])


def main() -> int:
    out_path = sys.argv[1] if len(sys.argv) > 1 else os.path.join(
        os.path.dirname(__file__), "..", "src", "data", "hf_tokenizer", "unicode_tables.cpp")
    punctuation = isolated_by(P.Punctuation(), CODE_POINTS)
    numeric = isolated_by(P.Digits(individual_digits=True), CODE_POINTS)
    clean = N.BertNormalizer(clean_text=True, handle_chinese_chars=False, strip_accents=False, lowercase=False)
    clean_removed = {c for c, r in changed_by(clean, CODE_POINTS).items() if r == ""}
    nfd = N.NFD()
    strip = N.BertNormalizer(clean_text=False, handle_chinese_chars=False, strip_accents=True, lowercase=False)
    nonspacing = {c for c in CODE_POINTS if nfd.normalize_str(chr(c)) == chr(c) and strip.normalize_str(chr(c)) == ""}
    combining = {c for c, r in changed_by(N.StripAccents(), CODE_POINTS).items() if r == ""}
    lowercase = changed_by(N.Lowercase(), CODE_POINTS)
    word = word_chars(CODE_POINTS)
    onig_word = matched_by(r"\w", CODE_POINTS)

    unknown = [c for c in CODE_POINTS if unicodedata.category(chr(c)) == "Cn"]
    new_categories = []
    for category in CATEGORIES:
        members = matched_by(r"\p{" + category + "}", unknown)
        new_categories += [(a, b, category) for a, b in ranges(members)]
    new_categories.sort()
    newer = {c for a, b, _ in new_categories for c in range(a, b + 1)}
    not_decomposed = set(newer)
    for form, normalizer in (("NFKD", N.NFKD()), ("NFD", N.NFD())):
        for c in CODE_POINTS:
            if c not in newer and unicodedata.normalize(form, chr(c)) != chr(c) and normalizer.normalize_str(chr(c)) == chr(c):
                not_decomposed.add(c)

    word_tables = "\n\n".join([
        range_table("kWord", "Rust regex's \\w (added tokens' single_word, the Whitespace pre-tokenizer)", word),
        range_table("kOnigWordAdded", "Oniguruma's \\w has these beyond kWord", onig_word - word),
        range_table("kOnigWordRemoved", "and not these of kWord", word - onig_word)])
    category_rows = "\n".join(f"    {{0x{a:x}, 0x{b:x}, \"{k}\"}}," for a, b, k in new_categories)
    text = f"""// Generated by scripts/gen_hf_unicode_tables.py from tokenizers {tokenizers.__version__}: do not edit.
// The Unicode answers of Hugging Face `tokenizers` that utf8proc and PCRE2 (Debian bookworm) give
// otherwise, or that the reader takes from here directly; see unicode_tables.h.
#include "data/hf_tokenizer/unicode_tables.h"

namespace roformer::data::hf::tables {{

{range_table("kPunctuation", "Punctuation / BertPreTokenizer: ASCII punctuation or unicode_categories' is_punctuation", punctuation)}

{range_table("kNumeric", "Digits: Rust's char::is_numeric", numeric)}

{range_table("kCleanTextRemoved", "BertNormalizer clean_text deletes these (NUL, U+FFFD, unicode_categories' is_other but tab, LF, CR)", clean_removed)}

{range_table("kNonspacingMarks", "BertNormalizer strip_accents deletes these after NFD (unicode_categories' is_mark_nonspacing)", nonspacing)}

{range_table("kCombiningMarks", "StripAccents deletes these (unicode-normalization's is_combining_mark)", combining)}

{lowercase_runs(lowercase)}

{word_tables}

// Characters Unicode 14.0 (PCRE2 10.42) does not assign and Oniguruma does, with their general category
const NewCategory kNewCategories[] = {{
{category_rows}
}};
const size_t kNewCategoriesSize = {len(new_categories)};

{range_table("kNotDecomposed", "unicode-normalization leaves these as they are (no decomposition, combining class 0)", not_decomposed)}

}}  // namespace roformer::data::hf::tables
"""
    with open(out_path, "w", encoding="utf-8") as f:
        f.write(text)
    print(f"wrote {out_path}: punctuation {len(punctuation)}, numeric {len(numeric)}, clean_text {len(clean_removed)}, "
          f"nonspacing {len(nonspacing)}, combining {len(combining)}, lowercase {len(lowercase)}, new {len(newer)} in "
          f"{len(new_categories)} ranges, not decomposed {len(not_decomposed)}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
