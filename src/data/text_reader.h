// Streaming reader of training text, one document at a time, in any of the input formats:
//   plain text  one paragraph a line, a blank line between documents
//   JSONL       one JSON object a line, the text in a named field (files named .jsonl or .json)
//   Parquet     one row a document, the text in a named string column (files starting with "PAR1")
// Plain text and JSONL may be gzip- or zstd-compressed (found by their first bytes; the name is read
// without a .gz/.zst suffix to tell JSONL from text). In JSONL and Parquet, newlines inside a text
// separate paragraphs. Every paragraph is checked to be valid UTF-8; a bad one is a roformer::Error
// naming the file and line (or row), never silently dropped or replaced.
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "data/byte_stream.h"

namespace roformer::data {

class ParquetTextReader;

// Returns the byte offset of the first invalid UTF-8 sequence in `text`, or -1 when it is valid
// (overlong forms, surrogates and code points above U+10FFFF are invalid).
int64_t find_invalid_utf8(const std::string& text);

enum class InputFormat { kText, kJsonl, kParquet };

// How a file is read: Parquet by its magic bytes; otherwise its compression by its magic bytes and
// JSONL by its name (.jsonl or .json, before any .gz/.gzip/.zst/.zstd suffix).
struct InputKind {
  InputFormat format = InputFormat::kText;
  Compression compression = Compression::kNone;
};
InputKind input_kind(const std::string& path);

// One document at a time from one file: its paragraphs (non-empty lines, without '\n').
// The paragraphs of one JSONL line of `path` (see DocumentReader): the line must be UTF-8 and a JSON
// object with the string field `field`, else a roformer::Error naming path:line_number. Empty when
// the text is.
void parse_jsonl_line(const std::string& line, const std::string& field, const std::string& path, int64_t line_number,
                      std::vector<std::string>& paragraphs);

class DocumentReader {
 public:
  // `text_field`: the JSONL field or Parquet column holding the text.
  DocumentReader(const std::string& path, const std::string& text_field = "text");
  ~DocumentReader();
  // Fills `paragraphs` with the next document's paragraphs; false at the end of the file.
  // Documents without any text are skipped.
  bool next(std::vector<std::string>& paragraphs);
  // Bytes of the file consumed so far (for progress; compressed input is read ahead by at most
  // 1 MiB); the file's size once it is read to the end.
  int64_t bytes_read() const;
  InputFormat format() const { return kind_.format; }
  // JSONL files only, instead of next(): the next line holding anything, unparsed, and its number,
  // for parse_jsonl_line (so that `prepare` parses JSON on its encoder threads); false at the end.
  bool next_jsonl_line(std::string& line, int64_t& line_number);

 private:
  bool read_line(std::string& line);
  bool next_text(std::vector<std::string>& paragraphs);
  bool next_jsonl(std::vector<std::string>& paragraphs);
  bool next_parquet(std::vector<std::string>& paragraphs);

  std::string path_;
  std::string field_;
  InputKind kind_;
  std::unique_ptr<LineReader> lines_;           // plain text and JSONL
  std::unique_ptr<ParquetTextReader> parquet_;  // Parquet
  int64_t line_number_ = 0;
  int64_t line_bytes_ = 0;                      // content bytes of the lines read
};

}  // namespace roformer::data
