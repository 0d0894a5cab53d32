// Catch2 for test files that use LibTorch. LibTorch's glog defines its own
// CHECK (a fatal assert): included after Catch it silently replaces
// Catch's, so a failing check aborts the binary instead of being reported
// and passing checks are not counted. LibTorch comes first here, its CHECK
// is dropped, and Catch's is the one in force.
#pragma once

#include <torch/torch.h>

#undef CHECK

#include <catch2/catch.hpp>
