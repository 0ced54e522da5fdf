// `exguardian mcp ...` (its own option parsing, like serve).
#pragma once

namespace exg::cli {
int mcp_main(int argc, char** argv);
}
