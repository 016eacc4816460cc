// Precompiled header for the library and the tests: LibTorch's headers dominate compile time on
// small machines, so they are parsed once here. Never include this file directly.
#pragma once
#include <torch/torch.h>

#include <cstdint>
#include <string>
#include <vector>
