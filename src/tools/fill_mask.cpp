// `roformer fill-mask`: top-k predictions for every [MASK] of each text; see fill_mask.h.
#include "tools/fill_mask.h"

#include <algorithm>
#include <cctype>
#include <iostream>

#include <fmt/format.h>
#include <spdlog/spdlog.h>
#include <nlohmann/json.hpp>

#include "core/device.h"
#include "core/error.h"
#include "data/text_reader.h"
#include "checkpoint/loader.h"

namespace roformer::tools {
namespace {

constexpr const char* kMaskText = "[MASK]";

// [CLS] text [SEP] with every literal "[MASK]" turned into the mask id. The pieces between masks are
// encoded separately, so the mask is never split or merged with its neighbours.
std::vector<int64_t> encode_with_masks(const data::Tokenizer& tok, const std::string& text) {
  std::vector<int64_t> ids = {data::Tokenizer::kCls};
  size_t start = 0;
  while (true) {
    const size_t at = text.find(kMaskText, start);
    const std::string piece = text.substr(start, at == std::string::npos ? std::string::npos : at - start);
    for (int32_t id : tok.encode(piece)) ids.push_back(id);
    if (at == std::string::npos) break;
    ids.push_back(data::Tokenizer::kMask);
    start = at + std::string(kMaskText).size();
  }
  ids.push_back(data::Tokenizer::kSep);
  return ids;
}

// Why a text cannot be filled, or "" when it can: no [MASK] in it, or (ids: its encoding) longer
// than the model takes.
std::string text_problem(const std::string& text, const std::vector<int64_t>& ids, int64_t max_len) {
  if (text.find(kMaskText) == std::string::npos) return "it has no [MASK] to fill; write [MASK] where a word is to be predicted";
  const auto length = ids.size();
  if (static_cast<int64_t>(length) > max_len)
    return fmt::format("it is {} tokens long with [CLS] and [SEP]; the model takes at most {} "
                       "(model.max_position_embeddings). It is refused rather than truncated: shorten it",
                       length, max_len);
  return "";
}

// A text as the messages quote it: in quotes, its first 60 bytes (cut at a character's start).
std::string quoted(const std::string& text) {
  size_t end = std::min<size_t>(text.size(), 60);
  while (end < text.size() && (static_cast<unsigned char>(text[end]) & 0xC0) == 0x80) --end;
  return "\"" + text.substr(0, end) + (end < text.size() ? "...\"" : "\"");
}

// The text with each [MASK] replaced by its prediction, detokenized by the tokenizer ("▁red" is "red"),
// the rest of the text as written (decoding the whole sequence would show the segments' dummy "▁"
// as a space before each one: "a red [MASK]." as "a red dog ."). A word-start piece right after a
// non-space gets its space; a piece that continues a word is put in as it is.
std::string filled_text(const data::Tokenizer& tok, const std::string& text, const std::vector<int32_t>& top) {
  std::string out;
  size_t start = 0;
  for (const int32_t id : top) {
    const size_t at = text.find(kMaskText, start);
    out += text.substr(start, at - start);
    const std::string word = tok.is_special(id) ? tok.id_to_piece(id) : tok.decode({id});
    if (tok.is_word_start(id) && !out.empty() && !std::isspace(static_cast<unsigned char>(out.back()))) out += ' ';
    out += word;
    start = at + std::string(kMaskText).size();
  }
  return out + text.substr(start);
}

// A text to fill and how messages name it ("text 2": the second argument; "stdin line 7").
struct Text {
  std::string text;
  std::string name;
};

// The texts: the arguments, or one per line of stdin (empty lines skipped).
std::vector<Text> read_texts(const FillMaskRequest& req) {
  std::vector<Text> texts;
  for (size_t i = 0; i < req.texts.size(); ++i) texts.push_back({req.texts[i], fmt::format("text {}", i + 1)});
  if (texts.empty()) {
    std::string line;
    for (int64_t number = 1; std::getline(std::cin, line); ++number) {
      if (!line.empty() && line.back() == '\r') line.pop_back();
      if (!line.empty()) texts.push_back({line, fmt::format("stdin line {}", number)});
    }
  }
  if (texts.empty()) throw Error("no text: pass \"... [MASK] ...\" as an argument or one text per line on stdin");
  return texts;
}

// One text's predictions, printed: the text filled with the top predictions, then each mask's top k
// (or one JSON record). ids: [CLS] text [SEP] with the masks.
void print_filled(checkpoint::LoadedCheckpoint& ck, const std::string& text, const std::vector<int64_t>& ids,
                  int64_t k, const torch::Device& device, bool json) {
  auto input = torch::tensor(ids, torch::kInt64).unsqueeze(0).to(device);  // (1, T)
  auto probs = torch::softmax(ck.model->forward(input).squeeze(0).to(torch::kFloat32), -1).cpu();  // (T, V)
  nlohmann::json masks = nlohmann::json::array();
  std::vector<int32_t> top;  // each mask's top prediction, in order
  std::string table;
  int mask_no = 0;
  for (size_t t = 1; t + 1 < ids.size(); ++t) {  // between [CLS] and [SEP]
    if (ids[t] != data::Tokenizer::kMask) continue;
    ++mask_no;
    auto [p, idx] = probs[static_cast<int64_t>(t)].topk(k);
    nlohmann::json preds = nlohmann::json::array();
    for (int64_t j = 0; j < k; ++j) {
      const auto id = static_cast<int32_t>(idx[j].item<int64_t>());
      const std::string token = ck.tokenizer->id_to_piece(id);
      const double prob = p[j].item<double>();
      if (j == 0) top.push_back(id);
      preds.push_back({{"token", token}, {"id", id}, {"probability", prob}});
      table += fmt::format("  [MASK] #{}  {:>2}. {:<20} {:.4f}\n", mask_no, j + 1, token, prob);
    }
    masks.push_back({{"position", t}, {"predictions", preds}});
  }
  const std::string sentence = filled_text(*ck.tokenizer, text, top);
  if (json)
    std::cout << nlohmann::json({{"text", text}, {"filled", sentence}, {"masks", masks}}).dump() << "\n";
  else
    std::cout << text << "\n  -> " << sentence << "\n" << table;
}

}  // namespace

void run_fill_mask(const FillMaskRequest& req) {
  const torch::Device device = core::select_device(req.device, "--device");
  auto ck = checkpoint::load_checkpoint(req.checkpoint, device);
  const std::vector<Text> texts = read_texts(req);
  const int64_t max_len = ck.config.model.max_position_embeddings;
  const int64_t k = std::min<int64_t>(req.top_k, ck.tokenizer->vocab_size());
  torch::NoGradGuard no_grad;
  int64_t failed = 0;
  for (const auto& [text, name] : texts) {
    // A text that cannot be filled is said (one line naming it) and the others still run. Texts are
    // checked as data files are: invalid UTF-8 would be tokenized as garbage (and end --json output in
    // an encoding error), and is not quoted back.
    if (const int64_t bad = data::find_invalid_utf8(text); bad >= 0) {
      spdlog::error("{}: invalid UTF-8 at byte {}; pass UTF-8 text (re-encode it, e.g. iconv -f latin1 -t utf-8)",
                    name, bad + 1);
      ++failed;
      continue;
    }
    const auto ids = encode_with_masks(*ck.tokenizer, text);
    if (const std::string problem = text_problem(text, ids, max_len); !problem.empty()) {
      spdlog::error("{} ({}): {}", name, quoted(text), problem);
      ++failed;
      continue;
    }
    print_filled(ck, text, ids, k, device, req.json);
  }
  std::cout.flush();
  if (failed > 0)
    throw Error(fmt::format("{} of {} text(s) could not be filled (each is named above); the others were", failed,
                            texts.size()));
}

}  // namespace roformer::tools
