// `roformer fill-mask`: the top-k tokens, with probabilities, for every [MASK] in a text.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

namespace roformer::tools {

struct FillMaskRequest {
  std::string checkpoint;
  std::vector<std::string> texts;  // empty: read one text per line from stdin
  int64_t top_k = 5;
  std::string device = "auto";
  bool json = false;               // one JSON record per text instead of the table
};

struct MaskPrediction {
  std::string token;
  int32_t id = 0;
  double probability = 0;
};

// Prints the predictions of every text; throws roformer::Error for user mistakes.
void run_fill_mask(const FillMaskRequest& request);

}  // namespace roformer::tools
