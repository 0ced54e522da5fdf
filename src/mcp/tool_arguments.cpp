#include "mcp/tool_arguments.hpp"

#include <cstdio>

#include "mcp/schema_check.hpp"
#include "serve/connect_rpc.hpp"

namespace exg::mcp {

std::optional<std::string> argument_error(const ToolDef& tool, const nlohmann::json& args) {
  if (!args.is_object()) return "arguments: expected an object";
  if (auto e = schema_error(tool.input_schema, args, "arguments")) return e;
  if (tool.name == "run_command" || tool.name == "start_command") {
    bool cmd = args.contains("command"), argv = args.contains("argv");
    if (cmd == argv) return std::string("arguments: give exactly one of \"command\" (a shell line) or \"argv\" (a program and its arguments)");
    if (argv && args["argv"][0].get_ref<const std::string&>().empty()) return std::string("arguments.argv[0]: the program must not be empty");
    if (auto env = args.find("env"); env != args.end())
      for (auto& [k, v] : env->items()) {
        bool ok = !k.empty() && k.size() <= 256 && k.find('=') == std::string::npos && k.find('\0') == std::string::npos;
        if (!ok) return "arguments.env." + k + ": a variable name is non-empty, without '=' or NUL";
      }
  }
  if (tool.name == "write_file") {
    if (auto m = args.find("mode"); m != args.end()) {
      const std::string& s = m->get_ref<const std::string&>();
      bool ok = s.size() >= 3 && s.size() <= 5 && s.find_first_not_of("01234567") == std::string::npos;
      if (!ok || octal_mode(s) > 07777) return "arguments.mode: expected octal permissions like \"0644\" or \"755\"";
    }
    std::string enc = args.value("encoding", "utf8");
    const std::string& c = args["content"].get_ref<const std::string&>();
    if (enc == "base64" && !serve::rpc::base64_decode(c)) return std::string("arguments.content: not valid base64 (encoding is \"base64\")");
    size_t n = enc == "base64" ? serve::rpc::base64_decode(c)->size() : c.size();
    if (n > kMaxWriteBytes) return "arguments.content: more than " + std::to_string(kMaxWriteBytes) + " bytes";
  }
  return std::nullopt;
}

std::vector<std::string> command_argv(const nlohmann::json& args) {
  if (args.contains("argv")) return args["argv"].get<std::vector<std::string>>();
  return {"/bin/sh", "-c", args["command"].get<std::string>()};
}

std::string content_bytes(const nlohmann::json& args) {
  const std::string& c = args["content"].get_ref<const std::string&>();
  if (args.value("encoding", "utf8") == "base64") return serve::rpc::base64_decode(c).value_or("");
  return c;
}

uint32_t octal_mode(const std::string& s) {
  uint32_t v = 0;
  for (char ch : s) v = v * 8 + static_cast<uint32_t>(ch - '0');
  return v;
}

std::string mode_text(uint32_t mode) {
  char buf[16];
  std::snprintf(buf, sizeof buf, "%04o", mode & 07777);
  return buf;
}

std::string parent_path(const std::string& p) {
  auto slash = p.find_last_of('/');
  if (slash == std::string::npos) return "";
  if (slash == 0) return "/";
  return p.substr(0, slash);
}

bool is_utf8(const std::string& s) {
  size_t i = 0, n = s.size();
  while (i < n) {
    unsigned char c = static_cast<unsigned char>(s[i]);
    size_t len = c < 0x80 ? 1 : (c >> 5) == 6 ? 2 : (c >> 4) == 14 ? 3 : (c >> 3) == 30 ? 4 : 0;
    if (len == 0 || i + len > n) return false;
    uint32_t cp = len == 1 ? c : len == 2 ? (c & 0x1f) : len == 3 ? (c & 0x0f) : (c & 0x07);
    for (size_t k = 1; k < len; ++k) {
      unsigned char d = static_cast<unsigned char>(s[i + k]);
      if ((d >> 6) != 2) return false;
      cp = (cp << 6) | (d & 0x3f);
    }
    if ((len == 2 && cp < 0x80) || (len == 3 && cp < 0x800) || (len == 4 && (cp < 0x10000 || cp > 0x10ffff)) ||
        (cp >= 0xd800 && cp <= 0xdfff))
      return false;
    i += len;
  }
  return true;
}

}  // namespace exg::mcp
