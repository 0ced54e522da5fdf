// Where the proxy's decisions go: one JSON object per decision. The
// supervisor's audit log (sandbox/audit.hpp) is one; egress knows only this.
#pragma once
#include <nlohmann/json.hpp>

namespace exg::egress {

class AuditSink {
 public:
  virtual ~AuditSink() = default;
  virtual bool enabled() const = 0;
  virtual void write(nlohmann::json event) = 0;
};

}  // namespace exg::egress
