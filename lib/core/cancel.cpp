#include "lib/core/cancel.h"

#include <atomic>
#include <csignal>

namespace moepack {
namespace {
std::atomic<int> g_signal{0};
static_assert(std::atomic<int>::is_always_lock_free, "the signal handler needs a lock-free flag");

extern "C" void on_cancel_signal(int sig) { request_cancel(sig); }
}  // namespace

void install_cancel_signal_handlers() {
  struct sigaction sa{};
  sa.sa_handler = on_cancel_signal;
  sigemptyset(&sa.sa_mask);
  sa.sa_flags = 0;  // no SA_RESTART: a blocked write returns EINTR and the loop re-checks
  sigaction(SIGINT, &sa, nullptr);
  sigaction(SIGTERM, &sa, nullptr);
  sigaction(SIGHUP, &sa, nullptr);
}

void request_cancel(int signal_number) {
  int expected = 0;
  g_signal.compare_exchange_strong(expected, signal_number);
}
void throw_if_cancelled() {
  if (int s = g_signal.load(std::memory_order_relaxed)) throw Cancelled{s};
}
void reset_cancel() { g_signal.store(0); }

}  // namespace moepack
