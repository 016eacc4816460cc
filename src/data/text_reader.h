// Streaming reader of training text: plain text (one paragraph a line, a blank line between
// documents) or JSONL (one document a line, its text in a named field; chosen by the .jsonl/.json
// extension). Every line is checked to be valid UTF-8; a bad line is a roformer::Error naming the
// file and line, never silently dropped or replaced.
#pragma once

#include <cstdint>
#include <fstream>
#include <string>
#include <vector>

namespace roformer::data {

// Returns the byte offset of the first invalid UTF-8 sequence in `text`, or -1 when it is valid
// (overlong forms, surrogates and code points above U+10FFFF are invalid).
int64_t find_invalid_utf8(const std::string& text);

// True when the path names a JSONL file (.jsonl or .json).
bool is_jsonl_path(const std::string& path);

// Throws roformer::Error when a path is missing or not a regular file. Checked before any output
// is written, so a typo never costs a partially overwritten directory.
void check_inputs_exist(const std::vector<std::string>& paths);

// One document at a time from one file: its paragraphs (non-empty lines, without '\n').
class DocumentReader {
 public:
  DocumentReader(const std::string& path, const std::string& jsonl_field = "text");
  // Fills `paragraphs` with the next document's paragraphs; false at the end of the file.
  // Documents without any text are skipped.
  bool next(std::vector<std::string>& paragraphs);
  // Bytes consumed so far (for progress reports).
  int64_t bytes_read() const { return bytes_read_; }

 private:
  bool read_line(std::string& line);

  std::string path_;
  std::string field_;
  bool jsonl_ = false;
  std::ifstream in_;
  int64_t line_number_ = 0;
  int64_t bytes_read_ = 0;
};

}  // namespace roformer::data
