// The resolver's own addresses for allowed names (transparent egress): see
// transparent.hpp.
#include <cstring>

#include "egress/transparent.hpp"

namespace exg::egress {

namespace {

constexpr uint32_t kRangeSize = 1u << (32 - kCaptureRangePrefix);

uint32_t value_of(const IpAddress& a) {
  return (uint32_t(a.bytes[0]) << 24) | (uint32_t(a.bytes[1]) << 16) | (uint32_t(a.bytes[2]) << 8) | a.bytes[3];
}

}  // namespace

bool HandedOutAddresses::in_range(const IpAddress& a) {
  return !a.v6 && (value_of(a) >> (32 - kCaptureRangePrefix)) == (kCaptureRangeBase >> (32 - kCaptureRangePrefix));
}

std::optional<IpAddress> HandedOutAddresses::address_for(const std::string& name) {
  uint32_t index;
  if (auto it = by_name_.find(name); it != by_name_.end()) {
    index = it->second;
  } else {
    // Skip the range's last address too (a broadcast address to some tools).
    if (next_ >= kRangeSize - 1) return std::nullopt;
    index = next_++;
    by_name_.emplace(name, index);
    by_index_.emplace(index, name);
  }
  uint32_t v = kCaptureRangeBase + index;
  IpAddress a;
  a.bytes[0] = uint8_t(v >> 24), a.bytes[1] = uint8_t(v >> 16), a.bytes[2] = uint8_t(v >> 8), a.bytes[3] = uint8_t(v);
  return a;
}

const std::string* HandedOutAddresses::name_for(const IpAddress& a) const {
  if (!in_range(a)) return nullptr;
  auto it = by_index_.find(value_of(a) - kCaptureRangeBase);
  return it == by_index_.end() ? nullptr : &it->second;
}

}  // namespace exg::egress
