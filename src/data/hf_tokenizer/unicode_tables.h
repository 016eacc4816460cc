// Tables of `tokenizers`' Unicode answers (unicode_tables.cpp, written by
// scripts/gen_hf_unicode_tables.py; tests/integration/test_hf_tokenizer_reader.cpp checks them against
// the venv's `tokenizers` on every code point of planes 0-3 and 14). Each range table is sorted, no overlaps.
#pragma once

#include <cstddef>
#include <cstdint>

namespace roformer::data::hf::tables {

struct Range {
  char32_t first, last;  // inclusive
};
struct LowerRun {
  char32_t first, last;  // every `stride`-th character from first to last maps to itself + delta
  int32_t stride, delta;
};
struct NewCategory {
  char32_t first, last;
  const char* category;  // two letters: "Lo", "Mn", ...
};

extern const Range kPunctuation[];
extern const size_t kPunctuationSize;
extern const Range kNumeric[];
extern const size_t kNumericSize;
extern const Range kCleanTextRemoved[];
extern const size_t kCleanTextRemovedSize;
extern const Range kNonspacingMarks[];
extern const size_t kNonspacingMarksSize;
extern const Range kCombiningMarks[];
extern const size_t kCombiningMarksSize;
extern const LowerRun kLowercase[];
extern const size_t kLowercaseSize;
extern const Range kWord[];
extern const size_t kWordSize;
extern const Range kOnigWordAdded[];
extern const size_t kOnigWordAddedSize;
extern const Range kOnigWordRemoved[];
extern const size_t kOnigWordRemovedSize;
extern const NewCategory kNewCategories[];
extern const size_t kNewCategoriesSize;
extern const Range kNotDecomposed[];
extern const size_t kNotDecomposedSize;

// Whether c lies in one of the `size` ranges.
bool contains(const Range* table, size_t size, char32_t c);

}  // namespace roformer::data::hf::tables
