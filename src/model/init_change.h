// How a run started from other weights (--init-from) may take a position key whose value differs
// from the weights' (context extension), by position scheme; answered in model/position.cpp, where
// the scheme of model.position is chosen. Free of LibTorch.
#pragma once

#include <string>

#include "core/config.h"

namespace roformer::model {

// kRefused: the weights were learned for the value; kComputed: nothing learned depends on it
// (rotary's base and table length, a position-free model's length); kCopiedRows: a learned table that
// grows only by copying its trained rows, when asked (train --extend-positions).
enum class InitChange { kRefused, kComputed, kCopiedRows };

// How `key` ("model.rotary_base", "model.max_position_embeddings") of a model with `m`'s position
// scheme may differ from the weights it starts from.
InitChange init_change(const config::ModelConfig& m, const std::string& key);

}  // namespace roformer::model
