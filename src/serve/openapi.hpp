// Our own OpenAPI document for what `exguardian serve` answers (GET
// /openapi.json; docs/serve-openapi.json is this text, checked by the tests),
// written from the route table (routes.hpp): each route one operation.
#pragma once
#include <string>

namespace exg::serve {
// Where an envd route whose method and path the control plane has too (GET
// /health, /metrics) is put: under this key of the control plane's operation.
inline constexpr const char* kEnvdVariant = "x-envd";
const std::string& openapi_document();
}
