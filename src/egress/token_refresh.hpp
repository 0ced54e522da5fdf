// OAuth refresh at the proxy (issue 45): an agent signed in with OAuth keeps
// its access and refresh tokens in a file; inside it holds placeholders, the
// proxy the values. When a vendor's token endpoint answers a refresh, the new
// tokens come back in a JSON (or form-encoded) body, whole or chunked: the proxy keeps each as a successor secret
// (SecretIndex::learn), the sandbox gets its new placeholder, and the new
// value is written into the user's credential file outside, in place of the
// old one, so the next run starts from it.
#pragma once
#include <set>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "util/error.hpp"

namespace exg::egress {

// A response body that may carry refreshed tokens is held whole, up to this;
// a larger one is cut (it could carry a value unmasked).
inline constexpr size_t kMaxTokenResponse = 1 << 20;

// Of a JSON body, every (field, string value) whose field name is in
// `fields`, at any depth (an object's keys in sorted order); of a form-encoded
// body (name=value&..., percent-decoded), every such pair. Neither: none.
std::vector<std::pair<std::string, std::string>> refreshed_tokens(std::string_view body,
                                                                  const std::set<std::string>& fields);

// The file at `path` (canonical) with every occurrence of `old_value` replaced
// by `new_value`, rewritten in place (same inode, mode and owner): the
// sandbox's copy is mounted over this file, and a rename would detach that
// mount and show the sandbox the real file. One write-back at a time in this
// process (two sessions refreshing at once both land).
// Error: the file cannot be read or written, or `old_value` is not in it.
Result<void> write_back_token(const std::string& path, const std::string& old_value, const std::string& new_value);

}  // namespace exg::egress
