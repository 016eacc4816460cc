// SIGINT/SIGTERM/SIGHUP as a stop request (the run saves and exits; a second signal kills); see signals.h.
#include "train/signals.h"

#include <atomic>
#include <csignal>
#include <unistd.h>

namespace roformer::train {
namespace {
std::atomic<int> g_signal{0};
std::atomic<bool> g_saving{false};

extern "C" void on_stop_signal(int sig) {
  if (g_signal.exchange(sig) == 0) return;
  if (g_saving.load()) {  // killing now would lose the save: it completes, then the run stops
    static const char msg[] = "\nroformer: a checkpoint is being saved; the run stops as soon as it is complete\n";
    [[maybe_unused]] const ssize_t n = ::write(STDERR_FILENO, msg, sizeof msg - 1);
    return;
  }
  std::signal(sig, SIG_DFL);  // second signal: give the user the default behaviour back
  std::raise(sig);
}
}  // namespace

void install_stop_handlers() {
  struct sigaction sa {};
  sa.sa_handler = on_stop_signal;
  sigemptyset(&sa.sa_mask);
  sa.sa_flags = SA_RESTART;
  sigaction(SIGINT, &sa, nullptr);
  sigaction(SIGTERM, &sa, nullptr);
  sigaction(SIGHUP, &sa, nullptr);  // the terminal closed: save as for Ctrl-C
}

SaveInProgress::SaveInProgress() { g_saving.store(true); }
SaveInProgress::~SaveInProgress() { g_saving.store(false); }

bool stop_requested() { return g_signal.load() != 0; }
int stop_signal() { return g_signal.load(); }

}  // namespace roformer::train
