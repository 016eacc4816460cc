// Which path each fused op ran (issue 51): its Triton kernel, or its ATen path and why. A fused op
// that cannot run its kernel (a dtype, a width, an unaligned tensor, no image for the GPU) takes its
// ATen path; that is said once per op and reason in the log, and `roformer bench` records the paths
// of the measured run (its JSON record's "kernel_paths"), so a row measured on the fallback is never
// read as the kernel's.
#pragma once

#include <map>
#include <optional>
#include <string>

namespace roformer::kernels {

// Records that `op` ran its Triton kernel (why_not: nullopt) or its ATen path (why_not: the reason);
// the first time for this op and this path, says so in the log (info).
void note_op_path(const std::string& op, const std::optional<std::string>& why_not);
// Records a path of another kind, e.g. "triton, dy copied to an aligned buffer", logged once likewise.
void note_op_path_text(const std::string& op, const std::string& path);

// Every op noted since the start (or reset_op_paths): op -> its paths in the order first seen,
// joined by "; " ("triton", "aten (the CPU)", "triton; aten (H = 40 is not a multiple of 16 ...)").
std::map<std::string, std::string> op_paths();
// Forgets the paths noted (tests; a bench measuring a second configuration).
void reset_op_paths();

}  // namespace roformer::kernels
