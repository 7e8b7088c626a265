// zenith's precompiled runtime: the IR's interpreter and derivative rules and the tape's
// runtime, compiled once (core/runtime_instance.hpp). A program built with
// ZENITH_PRECOMPILED_RUNTIME links this object instead of compiling them itself; compile it with
// the program's compiler, flags and configuration (CMake: zenith_precompiled_runtime()).
#undef ZENITH_PRECOMPILED_RUNTIME
#define ZENITH_RUNTIME_SOURCE
#include <zenith/zenith.hpp>
