// Cooperative cancellation. The CLI installs SIGINT/SIGTERM handlers that only record the
// signal; long-running work calls `throw_if_cancelled()` between units of work so that every
// destructor (staging directories, partial files) runs and nothing partial is left behind.
#pragma once

namespace moepack {

void install_cancel_signal_handlers();
void request_cancel(int signal_number);  // async-signal-safe
void throw_if_cancelled();               // throws Cancelled
void reset_cancel();                     // tests

struct Cancelled {
  int signal_number;
};

}  // namespace moepack
