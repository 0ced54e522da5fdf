// A fresh directory under /tmp for one test (its canonical path: /tmp may be a
// symlink), removed with everything in it when the test is done. One helper
// for the unit tests that need real files (they each had their own).
#pragma once
#include <gtest/gtest.h>
#include <limits.h>
#include <stdlib.h>

#include <filesystem>
#include <string>

namespace exg::test_support {

class TempDir {
 public:
  explicit TempDir(const std::string& prefix = "exg-test") {
    std::string tmpl = "/tmp/" + prefix + "-XXXXXX";
    if (!::mkdtemp(tmpl.data())) {
      ADD_FAILURE() << "mkdtemp " << tmpl << " failed";
      return;
    }
    char buf[PATH_MAX];
    path_ = ::realpath(tmpl.c_str(), buf) ? buf : tmpl;
  }
  ~TempDir() {
    std::error_code ec;
    if (!path_.empty()) std::filesystem::remove_all(path_, ec);
  }
  TempDir(const TempDir&) = delete;
  TempDir& operator=(const TempDir&) = delete;
  const std::string& path() const { return path_; }

 private:
  std::string path_;
};

}  // namespace exg::test_support
