// Plain-text / JSONL document reader with UTF-8 validation (see text_reader.h).
#include "data/text_reader.h"

#include <nlohmann/json.hpp>

#include <algorithm>
#include <filesystem>

#include "core/error.h"

namespace roformer::data {

namespace fs = std::filesystem;

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

bool is_jsonl_path(const std::string& path) {
  std::string ext = fs::path(path).extension().string();
  std::transform(ext.begin(), ext.end(), ext.begin(), [](unsigned char c) { return std::tolower(c); });
  return ext == ".jsonl" || ext == ".json";
}

void check_inputs_exist(const std::vector<std::string>& paths) {
  if (paths.empty()) throw Error("no input files given (pass at least one --input FILE)");
  for (const auto& p : paths) {
    std::error_code ec;
    if (!fs::exists(p, ec)) throw Error("input file not found: " + p + " (check the path)");
    if (fs::is_directory(p, ec))
      throw Error("input " + p + " is a directory, not a text or JSONL file" +
                  (fs::exists(fs::path(p) / "meta.json", ec)
                       ? std::string("; it is a prepared corpus, which `roformer prepare` does not take as input")
                       : std::string("; list the files in it, or, if it should be a prepared corpus, its meta.json "
                                     "is missing (`roformer prepare` did not finish there): prepare it again")));
    if (!fs::is_regular_file(p, ec)) throw Error("input is not a regular file: " + p);
  }
}

DocumentReader::DocumentReader(const std::string& path, const std::string& jsonl_field)
    : path_(path), field_(jsonl_field), jsonl_(is_jsonl_path(path)), in_(path, std::ios::binary) {
  if (!in_) throw Error("cannot open input file " + path + " (check that it exists and is readable)");
}

bool DocumentReader::read_line(std::string& line) {
  if (!std::getline(in_, line)) return false;
  ++line_number_;
  bytes_read_ += static_cast<int64_t>(line.size()) + 1;
  if (!line.empty() && line.back() == '\r') line.pop_back();
  const int64_t bad = find_invalid_utf8(line);
  if (bad >= 0)
    throw Error(path_ + ":" + std::to_string(line_number_) + ": invalid UTF-8 at byte " + std::to_string(bad + 1) +
                " of the line; re-encode the file as UTF-8 (e.g. iconv -f latin1 -t utf-8)");
  return true;
}

bool DocumentReader::next(std::vector<std::string>& paragraphs) {
  paragraphs.clear();
  std::string line;
  if (jsonl_) {
    while (read_line(line)) {
      if (line.find_first_not_of(" \t") == std::string::npos) continue;
      nlohmann::json doc;
      try {
        doc = nlohmann::json::parse(line);
      } catch (const nlohmann::json::exception& e) {
        throw Error(path_ + ":" + std::to_string(line_number_) + ": not a JSON object (" + e.what() + ")");
      }
      if (!doc.is_object() || !doc.contains(field_) || !doc[field_].is_string())
        throw Error(path_ + ":" + std::to_string(line_number_) + ": no string field \"" + field_ +
                    "\" (choose the field with --jsonl-field)");
      const std::string text = doc[field_].get<std::string>();
      size_t start = 0;
      while (start <= text.size()) {
        size_t end = text.find('\n', start);
        if (end == std::string::npos) end = text.size();
        if (end > start) paragraphs.emplace_back(text.substr(start, end - start));
        start = end + 1;
      }
      if (!paragraphs.empty()) return true;
    }
    return false;
  }
  while (read_line(line)) {
    if (line.find_first_not_of(" \t") == std::string::npos) {
      if (!paragraphs.empty()) return true;  // a blank line ends the document
      continue;
    }
    paragraphs.push_back(line);
  }
  return !paragraphs.empty();
}

}  // namespace roformer::data
