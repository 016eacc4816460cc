// The names of a run directory that code below checkpoint/ must know: the lock file every run
// directory holds while and after a run (checkpoint/run_dir.h's RunDirLock), by which data/ tells a
// run directory inside an input folder from input text, and the start of a TensorBoard event file's
// name, which tensorboard/ writes and checkpoint::RunLayout lists. Every other name of the layout is
// in checkpoint/run_layout.h.
#pragma once

namespace roformer::core {

inline constexpr const char* kRunLockFile = ".lock";
// events.out.tfevents.<seconds>.<host>.<pid>: the form TensorFlow and PyTorch write.
inline constexpr const char* kEventFilePrefix = "events.out.tfevents.";

}  // namespace roformer::core
