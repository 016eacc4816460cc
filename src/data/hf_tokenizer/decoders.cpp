// Decoders of a tokenizer.json (components.h): ByteLevel, WordPiece, Metaspace, BPEDecoder,
// ByteFallback, Fuse, Strip, Replace and Sequence, each as tokenizers' decoders/*.rs.
#include <nlohmann/json.hpp>

#include "data/hf_tokenizer/byte_level.h"
#include "data/hf_tokenizer/components.h"
#include "data/hf_tokenizer/unicode.h"

namespace roformer::data::hf {

namespace {

void replace_all(std::string& s, const std::string& from, const std::string& to) {
  if (from.empty()) return;
  for (size_t at = s.find(from); at != std::string::npos; at = s.find(from, at + to.size())) s.replace(at, from.size(), to);
}

// Invalid UTF-8 sequences each as U+FFFD (Rust's String::from_utf8_lossy).
std::string lossy_utf8(const std::string& bytes) {
  std::string out;
  for (size_t i = 0; i < bytes.size();) {
    const auto b = static_cast<uint8_t>(bytes[i]);
    size_t n = b < 0x80 ? 1 : (b >= 0xC2 && b < 0xE0) ? 2 : (b >= 0xE0 && b < 0xF0) ? 3 : (b >= 0xF0 && b < 0xF5) ? 4 : 0;
    bool ok = n > 0 && i + n <= bytes.size();
    for (size_t k = 1; ok && k < n; ++k) ok = (static_cast<uint8_t>(bytes[i + k]) & 0xC0) == 0x80;
    if (ok && n == 3) {
      const auto c1 = static_cast<uint8_t>(bytes[i + 1]);
      ok = !(b == 0xE0 && c1 < 0xA0) && !(b == 0xED && c1 >= 0xA0);
    } else if (ok && n == 4) {
      const auto c1 = static_cast<uint8_t>(bytes[i + 1]);
      ok = !(b == 0xF0 && c1 < 0x90) && !(b == 0xF4 && c1 >= 0x90);
    }
    if (ok) {
      out.append(bytes, i, n);
      i += n;
    } else {
      out += "\xEF\xBF\xBD";
      ++i;
      while (i < bytes.size() && (static_cast<uint8_t>(bytes[i]) & 0xC0) == 0x80 && n > 1) ++i, --n;
    }
  }
  return out;
}

class ByteLevelDecoder : public Decoder {
 public:
  void decode_chain(std::vector<std::string>& tokens) const override {
    std::string bytes;
    for (const std::string& t : tokens)
      if (!chars_to_bytes(t, bytes)) bytes += t;
    tokens.assign(1, lossy_utf8(bytes));
  }
};

class WordPieceDecoder : public Decoder {
 public:
  explicit WordPieceDecoder(const core::JsonReader& j) : prefix_(j.string("prefix", "##")), cleanup_(j.boolean("cleanup", true)) {}
  void decode_chain(std::vector<std::string>& tokens) const override {
    for (size_t i = 0; i < tokens.size(); ++i) {
      std::string& t = tokens[i];
      if (i != 0) {
        if (t.compare(0, prefix_.size(), prefix_) == 0) t.erase(0, prefix_.size());
        else t.insert(0, " ");
      }
      if (cleanup_)
        for (const auto& [from, to] : std::vector<std::pair<std::string, std::string>>{
                 {" .", "."}, {" ?", "?"}, {" !", "!"}, {" ,", ","}, {" ' ", "'"}, {" n't", "n't"}, {" 'm", "'m"},
                 {" do not", " don't"}, {" 's", "'s"}, {" 've", "'ve"}, {" 're", "'re"}})
          replace_all(t, from, to);
    }
  }

 private:
  std::string prefix_;
  bool cleanup_;
};

class MetaspaceDecoder : public Decoder {
 public:
  explicit MetaspaceDecoder(const core::JsonReader& j) : replacement_(j.string("replacement")) {
    std::string scheme = j.string("prepend_scheme", "always");
    if (j.has("add_prefix_space") && !j.at("add_prefix_space").is_null() && !j.boolean("add_prefix_space")) scheme = "never";
    prepend_ = scheme != "never";
  }
  void decode_chain(std::vector<std::string>& tokens) const override {
    for (size_t i = 0; i < tokens.size(); ++i) {
      std::string out;
      const std::string& t = tokens[i];
      for (size_t at = 0; at < t.size();) {
        if (t.compare(at, replacement_.size(), replacement_) == 0) {
          if (!(i == 0 && prepend_)) out += ' ';
          at += replacement_.size();
        } else {
          out += t[at++];
        }
      }
      tokens[i] = out;
    }
  }

 private:
  std::string replacement_;
  bool prepend_;
};

class BpeDecoder : public Decoder {
 public:
  explicit BpeDecoder(const core::JsonReader& j) : suffix_(j.string("suffix", "</w>")) {}
  void decode_chain(std::vector<std::string>& tokens) const override {
    for (size_t i = 0; i < tokens.size(); ++i) replace_all(tokens[i], suffix_, i + 1 == tokens.size() ? "" : " ");
  }

 private:
  std::string suffix_;
};

class ByteFallbackDecoder : public Decoder {
 public:
  void decode_chain(std::vector<std::string>& tokens) const override {
    std::vector<std::string> out;
    std::string pending;
    auto flush = [&] {  // valid UTF-8 as its text, else a U+FFFD for every byte
      if (pending.empty()) return;
      if (lossy_utf8(pending) == pending) out.push_back(pending);
      else out.insert(out.end(), pending.size(), "\xEF\xBF\xBD");
      pending.clear();
    };
    for (const std::string& t : tokens) {
      if (t.size() == 6 && t.compare(0, 3, "<0x") == 0 && t[5] == '>' && std::isxdigit(static_cast<unsigned char>(t[3])) &&
          std::isxdigit(static_cast<unsigned char>(t[4]))) {
        pending += static_cast<char>(std::stoi(t.substr(3, 2), nullptr, 16));
      } else {
        flush();
        out.push_back(t);
      }
    }
    flush();
    tokens.swap(out);
  }
};

class FuseDecoder : public Decoder {
 public:
  void decode_chain(std::vector<std::string>& tokens) const override {
    std::string all;
    for (const std::string& t : tokens) all += t;
    tokens.assign(1, all);
  }
};

class StripDecoder : public Decoder {
 public:
  explicit StripDecoder(const core::JsonReader& j)
      : content_(j.string("content")), start_(j.count("start")), stop_(j.count("stop")) {
    if (content_.empty() || utf8_length(static_cast<uint8_t>(content_[0])) != content_.size()) j.wrong("content", "one character");
  }
  void decode_chain(std::vector<std::string>& tokens) const override {
    for (std::string& t : tokens) {
      size_t begin = 0, end = t.size();
      for (size_t k = 0; k < start_ && t.compare(begin, content_.size(), content_) == 0; ++k) begin += content_.size();
      for (size_t k = 0; k < stop_ && end >= begin + content_.size() &&
                         t.compare(end - content_.size(), content_.size(), content_) == 0;
           ++k)
        end -= content_.size();
      t = t.substr(begin, end - begin);
    }
  }

 private:
  std::string content_;
  size_t start_, stop_;
};

class ReplaceDecoder : public Decoder {
 public:
  explicit ReplaceDecoder(const core::JsonReader& j)
      : pattern_(parse_pattern(j, "pattern")), content_(j.string("content")) {}
  void decode_chain(std::vector<std::string>& tokens) const override {
    std::vector<std::pair<size_t, size_t>> found;
    for (std::string& t : tokens) {
      pattern_->find_all(t, found);
      std::string out;
      size_t last = 0;
      for (const auto& [start, end] : found) {
        out.append(t, last, start - last);
        out += content_;
        last = end;
      }
      out.append(t, last, std::string::npos);
      t.swap(out);
    }
  }

 private:
  std::unique_ptr<Regex> pattern_;
  std::string content_;
};

class SequenceDecoder : public Decoder {
 public:
  explicit SequenceDecoder(const core::JsonReader& j) {
    for (const core::JsonReader& step : j.objects("decoders")) steps_.push_back(parse_decoder(step));
  }
  void decode_chain(std::vector<std::string>& tokens) const override {
    for (const auto& step : steps_) step->decode_chain(tokens);
  }

 private:
  std::vector<std::unique_ptr<Decoder>> steps_;
};

}  // namespace

std::unique_ptr<Decoder> parse_decoder(const core::JsonReader& j) {
  switch (one_of(j, "type", {"ByteLevel", "WordPiece", "Metaspace", "BPEDecoder", "ByteFallback", "Fuse", "Strip",
                             "Replace", "Sequence"})) {
    case 0: return std::make_unique<ByteLevelDecoder>();
    case 1: return std::make_unique<WordPieceDecoder>(j);
    case 2: return std::make_unique<MetaspaceDecoder>(j);
    case 3: return std::make_unique<BpeDecoder>(j);
    case 4: return std::make_unique<ByteFallbackDecoder>();
    case 5: return std::make_unique<FuseDecoder>();
    case 6: return std::make_unique<StripDecoder>(j);
    case 7: return std::make_unique<ReplaceDecoder>(j);
    default: return std::make_unique<SequenceDecoder>(j);
  }
}

}  // namespace roformer::data::hf
