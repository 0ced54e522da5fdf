// LaunchOptions' one behaviour: where a layer's words to the user go.
#include <cstdio>

#include "layer/layer.hpp"

namespace exg::layer {

void say(const LaunchOptions& opt, const std::string& line) {
  if (opt.say)
    opt.say(line);
  else
    std::fprintf(stderr, "exguardian: %s\n", line.c_str());
}

}  // namespace exg::layer
