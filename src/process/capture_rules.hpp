// The netlink half of transparent egress capture (transparent_capture.hpp
// says what it sets up and why): the default route through lo, the nftables
// table, the listener. Plain syscalls, nothing of the plan or exg_core, so
// that the microVM guest's static init links it as the process and OCI
// layers' setup does.
#pragma once
#include <cstdint>
#include <string>

namespace exg::process {

// Sets the capture up in the current netns; returns the listener (close-on-
// exec), or -1 with `what` naming the step that failed (errno set).
int set_up_transparent_capture(uint16_t port, std::string* what);

}  // namespace exg::process
