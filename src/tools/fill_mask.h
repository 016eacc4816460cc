// `roformer fill-mask`: the top-k tokens, with probabilities, for every [MASK] in a text, and the text filled.
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

// Prints every text with its masks filled by the top predictions (detokenized), then each mask's top
// k pieces; or one JSON record per text. A text that cannot be filled (no [MASK], too long) is said on
// stderr and the others still run; then roformer::Error at the end. Throws it for other user mistakes.
void run_fill_mask(const FillMaskRequest& request);

}  // namespace roformer::tools
