// `roformer fill-mask`: top-k predictions for every [MASK] of each text; see fill_mask.h.
#include "tools/fill_mask.h"

#include <iostream>

#include <fmt/format.h>
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

}  // namespace

void run_fill_mask(const FillMaskRequest& req) {
  const torch::Device device = core::select_device(req.device, "--device");
  auto ck = checkpoint::load_checkpoint(req.checkpoint, device);
  std::vector<std::string> texts = req.texts;
  // Texts are checked as data files are: invalid UTF-8 would otherwise be tokenized as garbage (and
  // end --json output in an encoding error).
  for (size_t i = 0; i < texts.size(); ++i)
    if (const int64_t bad = data::find_invalid_utf8(texts[i]); bad >= 0)
      throw Error(fmt::format("text argument {}: invalid UTF-8 at byte {}; pass UTF-8 text", i + 1, bad + 1));
  if (texts.empty()) {
    std::string line;
    for (int64_t number = 1; std::getline(std::cin, line); ++number) {
      if (!line.empty() && line.back() == '\r') line.pop_back();
      if (const int64_t bad = data::find_invalid_utf8(line); bad >= 0)
        throw Error(fmt::format("stdin line {}: invalid UTF-8 at byte {} of the line; re-encode the input as UTF-8 "
                                "(e.g. iconv -f latin1 -t utf-8)", number, bad + 1));
      if (!line.empty()) texts.push_back(line);
    }
  }
  if (texts.empty()) throw Error("no text: pass \"... [MASK] ...\" as an argument or one text per line on stdin");
  const int64_t max_len = ck.config.model.max_position_embeddings;
  const int64_t k = std::min<int64_t>(req.top_k, ck.tokenizer->vocab_size());
  torch::NoGradGuard no_grad;
  for (const auto& text : texts) {
    if (text.find(kMaskText) == std::string::npos)
      throw Error(fmt::format("the text has no [MASK] to fill: \"{}\"", text));
    auto ids = encode_with_masks(*ck.tokenizer, text);
    if (static_cast<int64_t>(ids.size()) > max_len)
      throw Error(fmt::format("the text is {} tokens long with [CLS] and [SEP]; the model takes at most {} "
                              "(model.max_position_embeddings). It is refused rather than truncated: shorten it",
                              ids.size(), max_len));
    auto input = torch::tensor(ids, torch::kInt64).unsqueeze(0).to(device);  // (1, T)
    auto probs = torch::softmax(ck.model->forward(input).squeeze(0).to(torch::kFloat32), -1).cpu();  // (T, V)
    nlohmann::json masks = nlohmann::json::array();
    if (!req.json) std::cout << text << "\n";
    int mask_no = 0;
    for (size_t t = 0; t < ids.size(); ++t) {
      if (ids[t] != data::Tokenizer::kMask) continue;
      ++mask_no;
      auto [p, idx] = probs[static_cast<int64_t>(t)].topk(k);
      nlohmann::json preds = nlohmann::json::array();
      for (int64_t j = 0; j < k; ++j) {
        const auto id = static_cast<int32_t>(idx[j].item<int64_t>());
        const std::string token = ck.tokenizer->id_to_piece(id);
        const double prob = p[j].item<double>();
        preds.push_back({{"token", token}, {"id", id}, {"probability", prob}});
        if (!req.json)
          std::cout << fmt::format("  [MASK] #{}  {:>2}. {:<20} {:.4f}\n", mask_no, j + 1, token, prob);
      }
      masks.push_back({{"position", t}, {"predictions", preds}});
    }
    if (req.json) std::cout << nlohmann::json({{"text", text}, {"masks", masks}}).dump() << "\n";
  }
  std::cout.flush();
}

}  // namespace roformer::tools
