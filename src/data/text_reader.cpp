// Document reader for plain text, JSONL and Parquet, with UTF-8 validation (see text_reader.h).
#include "data/text_reader.h"

#include <nlohmann/json.hpp>

#include <algorithm>
#include <filesystem>

#include <fmt/format.h>

#include "core/error.h"
#include "data/parquet_reader.h"

namespace roformer::data {

namespace fs = std::filesystem;

namespace {

std::string lower(std::string s) {
  std::transform(s.begin(), s.end(), s.begin(), [](unsigned char c) { return std::tolower(c); });
  return s;
}

// The paragraphs of one JSONL or Parquet text: its lines, empty ones left out.
void split_paragraphs(const std::string& text, std::vector<std::string>& paragraphs) {
  size_t start = 0;
  while (start <= text.size()) {
    size_t end = text.find('\n', start);
    if (end == std::string::npos) end = text.size();
    if (end > start) paragraphs.emplace_back(text, start, end - start);
    start = end + 1;
  }
}

// A line of text or JSONL must be UTF-8; the error names the file, line and byte.
void check_utf8_line(const std::string& line, const std::string& path, int64_t line_number) {
  const int64_t bad = find_invalid_utf8(line);
  if (bad >= 0)
    throw Error(path + ":" + std::to_string(line_number) + ": invalid UTF-8 at byte " + std::to_string(bad + 1) +
                " of the line; re-encode the file as UTF-8 (e.g. iconv -f latin1 -t utf-8)");
}

}  // namespace

int64_t find_invalid_utf8(const std::string& text) {
  const auto* s = reinterpret_cast<const unsigned char*>(text.data());
  const int64_t n = static_cast<int64_t>(text.size());
  int64_t i = 0;
  while (i < n) {
    const unsigned char c = s[i];
    if (c < 0x80) {
      ++i;
      continue;
    }
    int len;
    uint32_t cp;
    if ((c & 0xE0) == 0xC0) {
      len = 2;
      cp = c & 0x1F;
    } else if ((c & 0xF0) == 0xE0) {
      len = 3;
      cp = c & 0x0F;
    } else if ((c & 0xF8) == 0xF0) {
      len = 4;
      cp = c & 0x07;
    } else {
      return i;
    }
    if (i + len > n) return i;
    for (int k = 1; k < len; ++k) {
      if ((s[i + k] & 0xC0) != 0x80) return i;
      cp = (cp << 6) | (s[i + k] & 0x3F);
    }
    // Overlong encodings, UTF-16 surrogates and values beyond Unicode are not UTF-8.
    static constexpr uint32_t kMinForLength[5] = {0, 0, 0x80, 0x800, 0x10000};
    if (cp < kMinForLength[len] || cp > 0x10FFFF || (cp >= 0xD800 && cp <= 0xDFFF)) return i;
    i += len;
  }
  return -1;
}

InputKind input_kind(const std::string& path) {
  InputKind kind;
  const std::string head = read_head(path, 4);
  const fs::path name(path);
  const std::string ext = lower(name.extension().string());
  if (head == "PAR1") {
    kind.format = InputFormat::kParquet;
    return kind;
  }
  kind.compression = compression_of(head);
  // A name promising a format the bytes do not have: a damaged file or a mislabelled one, never
  // to be read as text.
  const bool gzip_name = ext == ".gz" || ext == ".gzip", zstd_name = ext == ".zst" || ext == ".zstd";
  if (ext == ".parquet" || (gzip_name && kind.compression != Compression::kGzip) ||
      (zstd_name && kind.compression != Compression::kZstd))
    throw Error(fmt::format("{} is named {} but does not start like one ({}); the file is damaged or mislabelled",
                            path, ext, ext == ".parquet" ? "no PAR1 magic" : gzip_name ? "no gzip magic 1f 8b"
                                                                                  : "no zstd magic 28 b5 2f fd"));
  const std::string inner = gzip_name || zstd_name ? lower(name.stem().extension().string()) : ext;
  if (inner == ".jsonl" || inner == ".json") kind.format = InputFormat::kJsonl;
  return kind;
}

DocumentReader::DocumentReader(const std::string& path, const std::string& text_field)
    : path_(path), field_(text_field), kind_(input_kind(path)) {
  if (kind_.format == InputFormat::kParquet) parquet_ = std::make_unique<ParquetTextReader>(path, text_field);
  else lines_ = std::make_unique<LineReader>(path);
}

DocumentReader::~DocumentReader() = default;

int64_t DocumentReader::bytes_read() const {
  if (parquet_) return parquet_->bytes_read();
  // Uncompressed: the lines handed out (exact); compressed: the file read so far.
  if (kind_.compression == Compression::kNone) return std::min(line_bytes_, lines_->stream().file_bytes());
  return lines_->stream().file_bytes();
}

bool DocumentReader::read_line(std::string& line) {
  if (!lines_->next(line)) return false;
  ++line_number_;
  line_bytes_ += static_cast<int64_t>(line.size()) + 1;
  if (!line.empty() && line.back() == '\r') line.pop_back();
  return true;
}

bool DocumentReader::next(std::vector<std::string>& paragraphs) {
  paragraphs.clear();
  switch (kind_.format) {
    case InputFormat::kJsonl: return next_jsonl(paragraphs);
    case InputFormat::kParquet: return next_parquet(paragraphs);
    default: return next_text(paragraphs);
  }
}

bool DocumentReader::next_jsonl_line(std::string& line, int64_t& line_number) {
  while (read_line(line)) {
    if (line.find_first_not_of(" \t") == std::string::npos) continue;
    line_number = line_number_;
    return true;
  }
  return false;
}

bool DocumentReader::next_jsonl(std::vector<std::string>& paragraphs) {
  std::string line;
  int64_t number = 0;
  while (next_jsonl_line(line, number)) {
    parse_jsonl_line(line, field_, path_, number, paragraphs);
    if (!paragraphs.empty()) return true;
  }
  return false;
}

void parse_jsonl_line(const std::string& line, const std::string& field, const std::string& path, int64_t line_number,
                      std::vector<std::string>& paragraphs) {
  paragraphs.clear();
  check_utf8_line(line, path, line_number);
  nlohmann::json doc;
  try {
    doc = nlohmann::json::parse(line);
  } catch (const nlohmann::json::exception& e) {
    throw Error(path + ":" + std::to_string(line_number) + ": not a JSON object (" + e.what() + ")");
  }
  if (!doc.is_object() || !doc.contains(field) || !doc[field].is_string())
    throw Error(path + ":" + std::to_string(line_number) + ": no string field \"" + field +
                "\" (choose the field with --text-field or data.text_field)");
  split_paragraphs(doc[field].get_ref<const std::string&>(), paragraphs);
}

bool DocumentReader::next_parquet(std::vector<std::string>& paragraphs) {
  std::string text;
  int64_t row = 0;
  while (parquet_->next(text, row)) {
    const int64_t bad = find_invalid_utf8(text);
    if (bad >= 0)
      throw Error(path_ + ": row " + std::to_string(row) + " (counting from 0), column \"" + field_ +
                  "\": invalid UTF-8 at byte " + std::to_string(bad + 1) + " of the text; the column must hold "
                  "UTF-8 text");
    split_paragraphs(text, paragraphs);
    if (!paragraphs.empty()) return true;
  }
  return false;
}

bool DocumentReader::next_text(std::vector<std::string>& paragraphs) {
  std::string line;
  while (read_line(line)) {
    check_utf8_line(line, path_, line_number_);
    if (line.find_first_not_of(" \t") == std::string::npos) {
      if (!paragraphs.empty()) return true;  // a blank line ends the document
      continue;
    }
    paragraphs.push_back(line);
  }
  return !paragraphs.empty();
}

}  // namespace roformer::data
