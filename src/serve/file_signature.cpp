#include "serve/file_signature.hpp"

#include <openssl/crypto.h>
#include <openssl/sha.h>

#include "util/base64.hpp"

namespace exg::serve {

std::string file_signature(const std::string& path, const std::string& operation, const std::string& user,
                           const std::string& access_token, std::optional<int64_t> expiration) {
  std::string raw = path + ":" + operation + ":" + user + ":" + access_token;
  if (expiration) raw += ":" + std::to_string(*expiration);
  unsigned char digest[SHA256_DIGEST_LENGTH];
  SHA256(reinterpret_cast<const unsigned char*>(raw.data()), raw.size(), digest);
  std::string b64 = util::base64_encode(std::string_view(reinterpret_cast<const char*>(digest), sizeof digest));
  while (!b64.empty() && b64.back() == '=') b64.pop_back();  // the SDK strips the padding
  return "v1_" + b64;
}

bool signature_matches(const SignedFileUrl& url, const std::string& access_token) {
  if (access_token.empty() || url.signature.empty()) return false;
  std::string want = file_signature(url.path, url.operation, url.user, access_token, url.expiration);
  return want.size() == url.signature.size() && CRYPTO_memcmp(want.data(), url.signature.data(), want.size()) == 0;
}

}  // namespace exg::serve
