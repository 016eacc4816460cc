// Document reader for plain text, JSONL and Parquet, with UTF-8 validation (see text_reader.h).
#include "data/text_reader.h"

#include <nlohmann/json.hpp>

#include <algorithm>
#include <filesystem>
#include <fstream>

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

// The paragraphs of one JSONL or Parquet text: its lines, empty ones left out, each longer than
// kMaxParagraphBytes in pieces.
void split_paragraphs(const std::string& text, std::vector<std::string>& paragraphs) {
  size_t start = 0;
  while (start <= text.size()) {
    size_t end = text.find('\n', start);
    if (end == std::string::npos) end = text.size();
    while (end > start) {
      const size_t cut = text_cut(std::string_view(text).substr(start, end - start), kMaxParagraphBytes);
      paragraphs.emplace_back(text, start, cut);
      start += cut;
    }
    start = end + 1;
  }
}

// A line (or a piece of one, starting at byte `offset` of the line) of text or JSONL must be UTF-8;
// the error names the file, line and byte.
void check_utf8_line(const std::string& line, const std::string& path, int64_t line_number, int64_t offset = 0) {
  const int64_t bad = find_invalid_utf8(line);
  if (bad >= 0)
    throw Error(path + ":" + std::to_string(line_number) + ": invalid UTF-8 at byte " + std::to_string(offset + bad + 1) +
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

namespace {

// A Parquet file starts and ends with "PAR1" (its footer's magic): a text that merely starts with
// those letters is text.
bool ends_like_parquet(const std::string& path) {
  std::ifstream in(path, std::ios::binary | std::ios::ate);
  const auto size = static_cast<int64_t>(in.tellg());
  if (!in || size < 12) return false;
  char tail[4];
  in.seekg(size - 4);
  in.read(tail, 4);
  return in && std::string(tail, 4) == "PAR1";
}

// The first decompressed bytes of a compressed file.
std::string decompressed_head(const std::string& path, size_t n) {
  ByteStream stream(path);
  std::string head(n, '\0');
  head.resize(stream.read(head.data(), n));
  return head;
}

}  // namespace

InputKind input_kind(const std::string& path) {
  InputKind kind;
  const std::string head = read_head(path, 4);
  const fs::path name(path);
  const std::string ext = lower(name.extension().string());
  const bool parquet_head = head == "PAR1";
  if (parquet_head && ends_like_parquet(path)) {
    kind.format = InputFormat::kParquet;
    return kind;
  }
  if (parquet_head && ext == ".parquet")
    throw Error(fmt::format("{} starts like a Parquet file but does not end like one (no PAR1 footer): the file is "
                            "truncated or still being written; copy or download it again", path));
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
  // Parquet compresses its own pages, and its reader needs to seek: a compressed one is not read.
  if (kind.compression != Compression::kNone && (inner == ".parquet" || decompressed_head(path, 4) == "PAR1"))
    throw Error(fmt::format("{} is a {}-compressed Parquet file; Parquet compresses its pages itself and is read "
                            "uncompressed: decompress it first ({} {})", path, compression_name(kind.compression),
                            kind.compression == Compression::kGzip ? "gunzip -k" : "zstd -d", path));
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

// JSONL: a whole line, which is one JSON text.
bool DocumentReader::read_record_line(std::string& line) {
  bool line_ends = false;
  if (!lines_->next_piece(line, kMaxRecordBytes, line_ends)) return false;
  ++line_number_;
  if (!line_ends)
    throw Error(fmt::format("{}:{}: the line is longer than {} MiB, the most one JSONL record may hold (it is read "
                            "whole); split the document into several records, or give its text as plain text, one "
                            "paragraph a line (no limit)", path_, line_number_, kMaxRecordBytes >> 20));
  line_bytes_ += static_cast<int64_t>(line.size()) + 1;
  if (!line.empty() && line.back() == '\r') line.pop_back();
  return true;
}

// Plain text: the next piece of a line, at most kMaxParagraphBytes, checked to be UTF-8.
bool DocumentReader::read_piece(std::string& piece, bool& line_ends) {
  if (!lines_->next_piece(piece, kMaxParagraphBytes, line_ends)) return false;
  if (piece_offset_ == 0) ++line_number_;
  line_bytes_ += static_cast<int64_t>(piece.size()) + (line_ends ? 1 : 0);
  if (line_ends && !piece.empty() && piece.back() == '\r') piece.pop_back();
  check_utf8_line(piece, path_, line_number_, piece_offset_);
  piece_offset_ = line_ends ? 0 : piece_offset_ + static_cast<int64_t>(piece.size());
  return true;
}

bool DocumentReader::next(std::vector<std::string>& paragraphs) {
  paragraphs.clear();
  continues_ = false;
  switch (kind_.format) {
    case InputFormat::kJsonl: return next_jsonl(paragraphs);
    case InputFormat::kParquet: return next_parquet(paragraphs);
    default: return next_text(paragraphs);
  }
}

bool DocumentReader::next_jsonl_line(std::string& line, int64_t& line_number) {
  while (read_record_line(line)) {
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
    if (text.size() > kMaxRecordBytes)
      throw Error(fmt::format("{}: row {} (counting from 0), column \"{}\": the text is {:.1f} MiB, more than the {} "
                              "MiB one document may hold (it is read whole); split the document into several rows, "
                              "or give its text as plain text, one paragraph a line (no limit)", path_, row, field_,
                              static_cast<double>(text.size()) / (1 << 20), kMaxRecordBytes >> 20));
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

// Paragraphs up to a blank line, in parts of about kMaxDocumentPartBytes (document_continues()).
// A blank line is one whose pieces hold nothing but spaces and tabs; such pieces of other lines are
// left out too (they encode to nothing).
bool DocumentReader::next_text(std::vector<std::string>& paragraphs) {
  size_t bytes = 0;
  std::string piece;
  bool line_ends = false;
  while (read_piece(piece, line_ends)) {
    if (piece.find_first_not_of(" \t") != std::string::npos) {
      line_has_text_ = in_document_ = true;
      bytes += piece.size();
      paragraphs.push_back(std::move(piece));
      piece.clear();
    }
    if (line_ends) {
      const bool blank = !line_has_text_;
      line_has_text_ = false;
      if (blank && in_document_) {  // a blank line ends the document
        in_document_ = false;
        return true;
      }
    }
    if (bytes >= kMaxDocumentPartBytes) {
      continues_ = true;
      return true;
    }
  }
  const bool open = in_document_;
  in_document_ = false;
  return open;
}

}  // namespace roformer::data
