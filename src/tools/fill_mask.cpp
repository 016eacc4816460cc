// `roformer fill-mask`: top-k predictions for every mask token of each text; see fill_mask.h.
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
#include "tools/eval.h"

namespace roformer::tools {
namespace {

// How a text's masks are found. The mask text is the tokenizer's mask token ("[MASK]", "<mask>").
// A tokenizer.json finds it in text itself (an added token, with its own rules: RoBERTa's <mask>
// takes the space before it): the text is encoded whole, as transformers' fill-mask pipeline does.
// SentencePiece's [MASK] is never produced from text: the text between the masks is encoded piece
// by piece and the mask id put between them, so the mask is never split or merged with its neighbours.
struct Masking {
  explicit Masking(const data::Tokenizer& tok)
      : tok(tok), mask(tok.special_tokens().mask), text(tok.id_to_piece(mask)), found_by_tokenizer(tok.encode(text) ==
                                                                                                    std::vector<int32_t>{mask}) {}

  // The text's ids with the special tokens around them ([CLS] ... [SEP]) and a mask id for each mask.
  std::vector<int64_t> encode(const std::string& input) const {
    std::vector<int32_t> ids;
    if (found_by_tokenizer) {
      ids = tok.encode(input);
    } else {
      for (size_t start = 0;;) {
        const size_t at = input.find(text, start);
        const auto piece = tok.encode(input.substr(start, at == std::string::npos ? std::string::npos : at - start));
        ids.insert(ids.end(), piece.begin(), piece.end());
        if (at == std::string::npos) break;
        ids.push_back(mask);
        start = at + text.size();
      }
    }
    const auto framed = tok.add_special_tokens(ids);
    return std::vector<int64_t>(framed.begin(), framed.end());
  }

  // The text with each mask replaced by its top prediction. A tokenizer that finds its own masks
  // decodes the whole sequence with the predictions in place. Otherwise each mask's text is
  // replaced by the prediction detokenized ("▁red" is "red") and the rest kept as written
  // (decoding the whole sequence would show the segments' dummy "▁" as a space before each one:
  // "a red [MASK]." as "a red dog ."); a word-start piece right after a non-space gets its space,
  // a piece that continues a word is put in as it is.
  std::string filled(const std::string& input, const std::vector<int64_t>& ids, const std::vector<int32_t>& top) const {
    if (found_by_tokenizer) {
      std::vector<int32_t> with;
      size_t k = 0;
      for (const int64_t id : ids) with.push_back(id == mask && k < top.size() ? top[k++] : static_cast<int32_t>(id));
      return tok.decode(with);
    }
    std::string out;
    size_t start = 0;
    for (const int32_t id : top) {
      const size_t at = input.find(text, start);
      out += input.substr(start, at - start);
      const std::string word = tok.is_special(id) ? tok.id_to_piece(id) : tok.decode({id});
      if (tok.is_word_start(id) && !out.empty() && !std::isspace(static_cast<unsigned char>(out.back()))) out += ' ';
      out += word;
      start = at + text.size();
    }
    return out + input.substr(start);
  }

  const data::Tokenizer& tok;
  const int32_t mask;
  const std::string text;
  const bool found_by_tokenizer;
};

// Why a text cannot be filled, or "" when it can: no mask in it, or (ids: its encoding) longer
// than the model takes.
std::string text_problem(const Masking& masking, const std::vector<int64_t>& ids, const SequenceBound& limit) {
  if (std::find(ids.begin(), ids.end(), masking.mask) == ids.end())
    return fmt::format("it has no {} to fill; write {} where a word is to be predicted", masking.text, masking.text);
  const auto length = ids.size();
  if (static_cast<int64_t>(length) > limit.tokens)
    return fmt::format("it is {} tokens long with its special tokens; the model takes at most {} ({}). It is "
                       "refused rather than truncated: shorten it", length, limit.tokens,
                       limit.table ? "model.max_position_embeddings: its learned absolute position table has no rows "
                                     "beyond"
                                   : "attention's scores grow with the square of the length");
  return "";
}

// A text as the messages quote it: in quotes, its first 60 bytes (cut at a character's start).
std::string quoted(const std::string& text) {
  size_t end = std::min<size_t>(text.size(), 60);
  while (end < text.size() && (static_cast<unsigned char>(text[end]) & 0xC0) == 0x80) --end;
  return "\"" + text.substr(0, end) + (end < text.size() ? "...\"" : "\"");
}

// A text to fill and how messages name it ("text 2": the second argument; "stdin line 7").
struct Text {
  std::string text;
  std::string name;
};

// The texts: the arguments, or one per line of stdin (empty lines skipped).
std::vector<Text> read_texts(const FillMaskRequest& req, const std::string& mask_text) {
  std::vector<Text> texts;
  for (size_t i = 0; i < req.texts.size(); ++i) texts.push_back({req.texts[i], fmt::format("text {}", i + 1)});
  if (texts.empty()) {
    std::string line;
    for (int64_t number = 1; std::getline(std::cin, line); ++number) {
      if (!line.empty() && line.back() == '\r') line.pop_back();
      if (!line.empty()) texts.push_back({line, fmt::format("stdin line {}", number)});
    }
  }
  if (texts.empty())
    throw Error(fmt::format("no text: pass \"... {} ...\" as an argument or one text per line on stdin", mask_text));
  return texts;
}

// One text's predictions, printed: the text filled with the top predictions, then each mask's top k
// (or one JSON record). ids: [CLS] text [SEP] with the masks.
void print_filled(checkpoint::LoadedCheckpoint& ck, const Masking& masking, const std::string& text,
                  const std::vector<int64_t>& ids, int64_t k, const torch::Device& device, bool json) {
  auto input = torch::tensor(ids, torch::kInt64).unsqueeze(0).to(device);  // (1, T)
  auto probs = torch::softmax(ck.model->forward(input).squeeze(0).to(torch::kFloat32), -1).cpu();  // (T, V)
  nlohmann::json masks = nlohmann::json::array();
  std::vector<int32_t> top;  // each mask's top prediction, in order
  std::string table;
  int mask_no = 0;
  for (size_t t = 0; t < ids.size(); ++t) {
    if (ids[t] != masking.mask) continue;
    ++mask_no;
    auto [p, idx] = probs[static_cast<int64_t>(t)].topk(k);
    nlohmann::json preds = nlohmann::json::array();
    for (int64_t j = 0; j < k; ++j) {
      const auto id = static_cast<int32_t>(idx[j].item<int64_t>());
      const std::string token = ck.tokenizer->id_to_piece(id);
      const double prob = p[j].item<double>();
      if (j == 0) top.push_back(id);
      preds.push_back({{"token", token}, {"id", id}, {"probability", prob}});
      table += fmt::format("  {} #{}  {:>2}. {:<20} {:.4f}\n", masking.text, mask_no, j + 1, token, prob);
    }
    masks.push_back({{"position", t}, {"predictions", preds}});
  }
  const std::string sentence = masking.filled(text, ids, top);
  if (json)
    std::cout << nlohmann::json({{"text", text}, {"filled", sentence}, {"masks", masks}}).dump() << "\n";
  else
    std::cout << text << "\n  -> " << sentence << "\n" << table;
}

}  // namespace

void run_fill_mask(const FillMaskRequest& req) {
  const torch::Device device = core::select_device(req.device, "--device");
  auto ck = checkpoint::load_checkpoint(req.checkpoint, device);
  const Masking masking(*ck.tokenizer);
  const std::vector<Text> texts = read_texts(req, masking.text);
  const SequenceBound limit = sequence_bound(ck.model->positions());  // eval's bound (tools/eval.h)
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
    const auto ids = masking.encode(text);
    if (const std::string problem = text_problem(masking, ids, limit); !problem.empty()) {
      spdlog::error("{} ({}): {}", name, quoted(text), problem);
      ++failed;
      continue;
    }
    print_filled(ck, masking, text, ids, k, device, req.json);
  }
  std::cout.flush();
  if (failed > 0)
    throw Error(fmt::format("{} of {} text(s) could not be filled (each is named above); the others were", failed,
                            texts.size()));
}

}  // namespace roformer::tools
