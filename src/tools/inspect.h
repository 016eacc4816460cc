// `roformer inspect`: what a checkpoint holds (step, tokens seen, config, parameter count, last
// metrics) and whether its files still match the manifest.
#pragma once

#include <string>

namespace roformer::tools {

// Prints the report; returns 0 when the checkpoint is intact, 1 when it is damaged or incomplete.
int run_inspect(const std::string& path, bool json);

}  // namespace roformer::tools
