// envd's upload body (src/serve/multipart.cpp): multipart/form-data as the
// e2b SDK posts files to /files. The input's first line is the Content-Type,
// the rest the body. Any body gives the files or one error, never a throw;
// there are 1..1000 files, each file's bytes are a piece of the body that
// holds no delimiter; and the files written again as multipart with the same
// boundary read back the same.
#include <cstdint>
#include <string>

#include "check.hpp"
#include "serve/multipart.hpp"

using namespace exg::serve;

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  std::string in(reinterpret_cast<const char*>(data), size);
  size_t nl = in.find('\n');
  if (nl == std::string::npos) return 0;
  std::string type = in.substr(0, nl), body = in.substr(nl + 1);

  auto files = multipart_files(type, body);
  if (!files) {
    FUZZ_CHECK(!files.error().empty(), "an error says what is wrong");
    return 0;
  }
  const std::string boundary = header_param(type, "boundary");
  FUZZ_CHECK(!boundary.empty() && boundary.size() <= kMaxBoundary, "a body is read only with a usable boundary");
  FUZZ_CHECK(!files->empty() && files->size() <= kMaxUploadFiles, "an upload holds 1..1000 files");
  const std::string delim = "\r\n--" + boundary;
  bool plain_names = true;
  for (const auto& f : *files) {
    FUZZ_CHECK(f.data.size() <= body.size() && body.find(f.data) != std::string::npos, "a file's bytes are the body's");
    FUZZ_CHECK(f.data.find(delim) == std::string::npos, "a file's bytes hold no delimiter");
    plain_names = plain_names && f.path.find_first_of("\"\r\n") == std::string::npos;
  }
  // Round trip, as the SDK writes a form (names it cannot quote are left out).
  if (!plain_names) return 0;
  std::string again;
  for (const auto& f : *files)
    again += "--" + boundary + "\r\nContent-Disposition: form-data; name=\"file\"; filename=\"" + f.path +
             "\"\r\nContent-Type: application/octet-stream\r\n\r\n" + f.data + "\r\n";
  again += "--" + boundary + "--\r\n";
  std::string param = boundary.find('"') == std::string::npos ? "\"" + boundary + "\"" : boundary;
  auto back = multipart_files("multipart/form-data; boundary=" + param, again);
  if (!back) std::fprintf(stderr, "refused again: %s\n", back.error().c_str());
  FUZZ_CHECK(back.has_value() && back->size() == files->size(), "files written again are read again");
  for (size_t i = 0; i < files->size(); ++i)
    FUZZ_CHECK((*back)[i].path == (*files)[i].path && (*back)[i].data == (*files)[i].data, "files written again read back the same");
  return 0;
}
