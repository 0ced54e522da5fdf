// E2B's signed /files URLs (the SDK's uploadUrl / downloadUrl of a secure
// sandbox): "v1_" + base64(sha256("PATH:OPERATION:USER:TOKEN[:EXPIRATION]"))
// without padding, where OPERATION is read or write, USER the URL's
// ?username= ("" when absent), TOKEN the sandbox's envd access token and
// EXPIRATION the unix second the URL ends at (absent: it never does). A
// holder of such a URL does that one operation on that one path, nothing else.
#pragma once
#include <cstdint>
#include <optional>
#include <string>

namespace exg::serve {

std::string file_signature(const std::string& path, const std::string& operation, const std::string& user,
                           const std::string& access_token, std::optional<int64_t> expiration);

// A URL's signature parameters, read from its query string.
struct SignedFileUrl {
  std::string signature, path, operation, user;
  std::optional<int64_t> expiration;
};

// Does `url` carry the signature `access_token` makes? Compared in constant time.
bool signature_matches(const SignedFileUrl& url, const std::string& access_token);

}  // namespace exg::serve
