// `roformer tokenizer encode` (tokenize.h).
#include "tools/tokenize.h"

#include <istream>
#include <ostream>

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include "core/error.h"
#include "data/text_reader.h"
#include "data/tokenizer.h"

namespace roformer::tools {

void run_tokenizer_encode(const EncodeRequest& request, std::istream& in, std::ostream& out) {
  const data::Tokenizer tok = data::Tokenizer::load(request.tokenizer);
  std::string line, text;
  for (int64_t number = 1; std::getline(in, line); ++number) {
    if (const int64_t bad = data::find_invalid_utf8(line); bad >= 0)
      throw Error(fmt::format("stdin line {}: invalid UTF-8 at byte {} of the line; re-encode the input as UTF-8 "
                              "(e.g. iconv -f latin1 -t utf-8)", number, bad + 1));
    std::vector<int32_t> ids = tok.encode(line);
    if (request.add_special_tokens) ids = tok.add_special_tokens(ids);
    text.clear();
    if (request.pieces) {
      nlohmann::json pieces = nlohmann::json::array();
      for (const int32_t id : ids) pieces.push_back(tok.id_to_piece(id));
      text = pieces.dump();
    } else {
      for (size_t i = 0; i < ids.size(); ++i) text += (i ? " " : "") + std::to_string(ids[i]);
    }
    out << text << '\n';
  }
  out.flush();
  if (!out) throw Error("cannot write the ids to stdout");
}

}  // namespace roformer::tools
