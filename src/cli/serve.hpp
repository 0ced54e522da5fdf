// `exguardian serve ...` (its own option parsing, like session-client).
#pragma once

namespace exg::cli {
int serve_main(int argc, char** argv);
}
