// Compiles the fuzz target fuzz_verify_manifest into the ordinary test suite (registered by name,
// not as a libFuzzer entry point) so fuzz_regressions_test.cpp replays its regression inputs.
#define MOEPACK_FUZZ_REPLAY
#include "fuzz/fuzz_verify_manifest.cpp"
