// OpenSSL and zlib, bound on first use (cmake/lazy_stubs.py says why: loading
// them was most of what exguardian spent before main(), on every run, while a
// plain `run` never calls them). In the exguardian binary every function of
// theirs that the code calls is a stub; the first call, or load_shared_libs(),
// opens the libraries with dlopen() and binds every stub at once. In other
// programs (the unit tests) they are linked as usual and this does nothing.
#pragma once
#include "util/error.hpp"

namespace exg {

// Opens and binds them now: a clear error (what is missing) instead of an exit
// at a stub's first call. Call before the first use where failing is still
// clean (before a sandbox starts, before a server listens). Thread-safe.
Result<void> load_shared_libs();

}  // namespace exg
