// Declarations only; see src/dist/gloo_compat/README.md.
#pragma once
#include "gloo/context.h"
