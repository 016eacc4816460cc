// Streaming reader of training text, one document at a time, in any of the input formats:
//   plain text  one paragraph a line, a blank line between documents
//   JSONL       one JSON object a line, the text in a named field (files named .jsonl or .json)
//   Parquet     one row a document, the text in a named string column (files starting with "PAR1")
// Plain text and JSONL may be gzip- or zstd-compressed (found by their first bytes; the name is read
// without a .gz/.zst suffix to tell JSONL from text). In JSONL and Parquet, newlines inside a text
// separate paragraphs. Every paragraph is checked to be valid UTF-8; a bad one is a roformer::Error
// naming the file and line (or row), never silently dropped or replaced.
//
// Memory does not grow with what one line holds (docs/data.md, "Memory"): a paragraph longer than
// kMaxParagraphBytes is handed out in pieces cut before a space (byte_stream.h: text_cut), which
// encode to the tokens of the whole; a plain-text document longer than kMaxDocumentPartBytes in
// parts (document_continues). A JSONL line or Parquet value is one JSON text or value, so it is
// read whole, up to kMaxRecordBytes; a longer one is an error naming the file and line (or row).
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "data/byte_stream.h"

namespace roformer::data {

class ParquetTextReader;

// The longest paragraph handed out: longer ones come in pieces (SentencePiece's training takes
// paragraphs up to this length, sentencepiece_tokenizer.h: kMaxSentenceBytes).
constexpr size_t kMaxParagraphBytes = 64 * 1024;
// A plain-text document comes in parts of about this much text (a file without blank lines is one
// document).
constexpr size_t kMaxDocumentPartBytes = 1024 * 1024;
// The longest JSONL line and Parquet text value read.
constexpr size_t kMaxRecordBytes = 64 * 1024 * 1024;

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

// The paragraphs of one JSONL line of `path` (see DocumentReader): the line must be UTF-8 and a JSON
// object with the string field `field`, else a roformer::Error naming path:line_number. Empty when
// the text is.
void parse_jsonl_line(const std::string& line, const std::string& field, const std::string& path, int64_t line_number,
                      std::vector<std::string>& paragraphs);

// One document at a time from one file: its paragraphs (non-empty lines, without '\n').
class DocumentReader {
 public:
  // `text_field`: the JSONL field or Parquet column holding the text.
  DocumentReader(const std::string& path, const std::string& text_field = "text");
  ~DocumentReader();
  // Fills `paragraphs` with the next document's paragraphs, or the next part of a long plain-text
  // document (document_continues() says whether more follows; a part may be empty when the text
  // ended just after the one before); false at the end of the file. Documents without text are
  // skipped.
  bool next(std::vector<std::string>& paragraphs);
  // Whether the document of the last next() goes on in the next call.
  bool document_continues() const { return continues_; }
  // Bytes of the file consumed so far (for progress; compressed input is read ahead by at most
  // 1 MiB); the file's size once it is read to the end.
  int64_t bytes_read() const;
  InputFormat format() const { return kind_.format; }
  // JSONL files only, instead of next(): the next line holding anything, unparsed, and its number,
  // for parse_jsonl_line (so that `prepare` parses JSON on its encoder threads); false at the end.
  bool next_jsonl_line(std::string& line, int64_t& line_number);

 private:
  bool read_record_line(std::string& line);
  bool read_piece(std::string& piece, bool& line_ends);
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
  int64_t piece_offset_ = 0;                    // where the next piece starts in its line
  bool line_has_text_ = false;                  // plain text: the line being read is not blank
  bool in_document_ = false;                    // plain text: a document is open
  bool continues_ = false;
};

}  // namespace roformer::data
