// The static pid-1 program of the container and gVisor sandboxes (today
// exguardian-init: signals, reaping, the command's session and terminal; the
// agent later), embedded in exguardian at build time so that one copied
// binary carries it. cmake/EmbedPid1.cmake names the program (one line) and
// generates the definitions from src/pid1/embedded.cpp.in.
#pragma once
#include <span>
#include <string_view>

namespace exg::pid1 {

// The program's bytes: a stripped, statically linked executable.
std::span<const unsigned char> embedded();

// Its file name ("exguardian-init").
std::string_view name();

// Where `make install` and the Debian package put it, relative to the
// directory of the installed exguardian ("../lib/exguardian/exguardian-init").
std::string_view installed_relpath();

}  // namespace exg::pid1
