// The training run's data: the prepared-data cache lives in data/prepared_cache.h; the trainer
// names it here under train::.
#pragma once

#include "data/prepared_cache.h"

namespace roformer::train {

using data::open_prepared_data;
using data::PreparedDataRequest;

}  // namespace roformer::train
