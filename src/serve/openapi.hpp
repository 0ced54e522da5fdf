// Our own OpenAPI document for what `exguardian serve` answers (GET
// /openapi.json; docs/serve-openapi.json is this text, checked by the tests).
#pragma once
#include <string>

namespace exg::serve {
const std::string& openapi_document();
}
