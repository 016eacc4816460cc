// `roformer config from-hf DIR`: the config a run continuing the weights of a Hugging Face model
// directory needs (a roformer export, or a released model as transformers' save_pretrained leaves
// it): its model section read from DIR/config.json as `train --init-from DIR` reads it, so that
// `roformer train -c THAT --init-from DIR` starts without a key written by hand (issue 54).
#pragma once

#include <string>

namespace roformer::tools {

// The YAML (a comment saying how to use it, then every section): the model section of DIR's weights,
// data.max_seq_len within their position table, the rest at its defaults. Throws roformer::Error
// naming the file and the fix for a directory without config.json or a config.json roformer cannot
// read (a family it does not compute, a key of the wrong type).
std::string config_from_hf(const std::string& dir);

}  // namespace roformer::tools
