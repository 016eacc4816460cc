// `roformer config from-hf DIR`; see config_from_hf.h.
#include "tools/config_from_hf.h"

#include <algorithm>
#include <filesystem>

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include "core/config.h"
#include "core/error.h"
#include "core/file.h"
#include "core/json_read.h"
#include "hf/family.h"

namespace roformer::tools {
namespace fs = std::filesystem;

std::string config_from_hf(const std::string& dir) {
  std::error_code ec;
  if (!fs::is_directory(dir, ec))
    throw Error(fmt::format("config from-hf: {} is not a directory; give a Hugging Face model directory (as "
                            "save_pretrained or a Hub download leaves it) or a `roformer export` directory", dir));
  const std::string file = (fs::path(dir) / "config.json").string();
  if (!fs::exists(file, ec))
    throw Error(fmt::format("config from-hf: {} has no config.json; give a Hugging Face model directory (as "
                            "save_pretrained or a Hub download leaves it) or a `roformer export` directory", dir));
  const auto json = core::parse_json(core::read_file(file, "config.json"), "config from-hf: " + file,
                                     "give the config.json save_pretrained writes");
  const hf::ExportedModel exported = hf::read_config_json(json, file, "config from-hf");
  config::Config c;
  c.model = exported.model;
  c.model.vocab_size = 0;  // the tokenizer's, which comes with the weights (a padded embedding's extra rows are left out)
  // The training length within the position table (a learned one has no rows beyond).
  c.data.max_seq_len = std::min(c.data.max_seq_len, c.model.max_position_embeddings);
  return fmt::format("# roformer config from-hf {}: the model section of its weights ({}, {}); continue them with\n"
                     "#   roformer train -c THIS_FILE --init-from {} --set 'data.train_files=[YOUR_TEXT]'\n",
                     dir, exported.family->architecture(), exported.family->what(), dir) +
         config::to_yaml(c);
}

}  // namespace roformer::tools
