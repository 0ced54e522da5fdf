// Drives `exguardian mcp` with the official MCP TypeScript SDK's client over
// its stdio transport (tests/mcp/test_mcp.sh installs the pinned SDK).
// Env: EXG (the binary), WS_ROOT (a host directory the server may mount), STATE (its --state-dir).
// Prints "ok ..." / "FAIL ..." lines and "N passed, M failed".
import { Client } from "@modelcontextprotocol/sdk/client/index.js";
import { StdioClientTransport } from "@modelcontextprotocol/sdk/client/stdio.js";

import { checkBackground, checkCommands, counts, ok, rpcError } from "./sdk_checks.mjs";

const call = (name, args, opts) => client.callTool({ name, arguments: args }, undefined, opts);

const transport = new StdioClientTransport({
  command: process.env.EXG,
  args: ["mcp", "--state-dir", process.env.STATE, "--workspace-root", process.env.WS_ROOT],
  stderr: "inherit",
});
const client = new Client({ name: "exguardian-test", version: "1.0.0" });
await client.connect(transport);
ok(client.getServerVersion()?.name === "exguardian", "initialize: serverInfo names exguardian", client.getServerVersion());
ok(client.getServerCapabilities()?.tools !== undefined, "initialize: the tools capability");

// ---- the tools and their schemas ----
const names = ["create_sandbox", "run_command", "start_command", "read_output", "read_file", "write_file", "list_files",
  "stat_file", "remove_file", "list_sandboxes", "destroy_sandbox", "evidence"];
const { tools } = await client.listTools();
ok(JSON.stringify(tools.map((t) => t.name).sort()) === JSON.stringify([...names].sort()), "tools/list: the twelve fixed names", tools.map((t) => t.name));
ok(tools.every((t) => t.inputSchema?.type === "object" && t.outputSchema?.type === "object" && t.description.length > 20),
  "every tool has a description, an input schema and an output schema");
const run = tools.find((t) => t.name === "run_command");
ok(run.inputSchema.required.includes("sandbox_id") && run.inputSchema.properties.argv && run.inputSchema.properties.command &&
  run.inputSchema.additionalProperties === false, "run_command's schema: sandbox_id required, command or argv, nothing else");
ok(["exit_code", "stdout", "stderr"].every((k) => run.outputSchema.required.includes(k)), "run_command's output schema: exit_code, stdout, stderr");

// ---- bad input: JSON-RPC errors, the server goes on ----
let e = await rpcError(call("no_such_tool", {}));
ok(e && e.code === -32602 && /Unknown tool: no_such_tool/.test(e.message), "unknown tool: -32602 naming it", e?.message);
e = await rpcError(call("run_command", { command: "true" }));
ok(e && e.code === -32602 && /arguments\.sandbox_id: missing/.test(e.message), "missing sandbox_id: -32602 naming it", e?.message);
e = await rpcError(call("run_command", { sandbox_id: "x", command: "true", argv: ["true"] }));
ok(e && e.code === -32602 && /exactly one of "command"/.test(e.message), "command and argv both: -32602", e?.message);
e = await rpcError(call("run_command", { sandbox_id: "x", argv: ["true", 5] }));
ok(e && e.code === -32602 && /arguments\.argv\[1\]: expected a string/.test(e.message), "argv[1] a number: -32602 naming it", e?.message);
e = await rpcError(call("create_sandbox", { layer: "chroot" }));
ok(e && e.code === -32602 && /arguments\.layer: expected one of/.test(e.message), "an unknown layer: -32602", e?.message);
e = await rpcError(call("read_file", { sandbox_id: "x", path: "a", colour: "red" }));
ok(e && e.code === -32602 && /arguments\.colour: unknown argument/.test(e.message), "an unknown argument: -32602", e?.message);
let r = await call("run_command", { sandbox_id: "nosuchsandbox", command: "true" });
ok(r.isError && /no such sandbox/.test(r.content[0].text), "an unknown sandbox_id: a tool error the model reads", r);
await client.ping();
ok(true, "ping after the bad calls: the server is unharmed");

// ---- a sandbox ----
r = await call("create_sandbox", { workspace: process.env.WS_ROOT, timeout_seconds: 600 });
ok(!r.isError && typeof r.structuredContent?.sandbox_id === "string", "create_sandbox returns sandbox_id", r);
const id = r.structuredContent.sandbox_id;
const sid = { sandbox_id: id };
r = await call("create_sandbox", { workspace: "/etc" });
ok(r.isError && /outside the directories this server may mount/.test(r.content[0].text), "a workspace outside --workspace-root: refused", r.content[0]);

await checkCommands(call, sid);

// ---- files ----
r = await call("write_file", { ...sid, path: "sub/dir/a.txt", content: "héllo\n", make_parents: true });
ok(!r.isError && r.structuredContent.bytes === 7, "write_file with make_parents", r);
r = await call("read_file", { ...sid, path: "sub/dir/a.txt" });
ok(r.structuredContent?.content === "héllo\n" && r.structuredContent.encoding === "utf8" && r.structuredContent.eof, "read_file round trip", r.structuredContent);
r = await call("run_command", { ...sid, command: "cat sub/dir/a.txt" });
ok(r.structuredContent?.stdout === "héllo\n", "the command sees the file written");
r = await call("write_file", { ...sid, path: "bin.dat", content: Buffer.from([0, 255, 1, 128]).toString("base64"), encoding: "base64", mode: "0600" });
r = await call("read_file", { ...sid, path: "bin.dat" });
ok(r.structuredContent?.encoding === "base64" && Buffer.from(r.structuredContent.content, "base64").equals(Buffer.from([0, 255, 1, 128])),
  "binary content comes back base64", r.structuredContent);
r = await call("stat_file", { ...sid, path: "bin.dat" });
ok(r.structuredContent?.type === "file" && r.structuredContent.size === 4 && r.structuredContent.mode === "0600", "stat_file: type, size, mode", r.structuredContent);
r = await call("list_files", { ...sid, path: "sub/dir" });
ok(r.structuredContent?.entries?.length === 1 && r.structuredContent.entries[0].name === "a.txt", "list_files", r.structuredContent);
r = await call("remove_file", { ...sid, path: "sub", recursive: true });
ok(r.structuredContent?.removed === true, "remove_file recursive");
r = await call("stat_file", { ...sid, path: "sub" });
ok(r.isError && /ENOENT/.test(r.content[0].text), "removed: stat_file says ENOENT", r.content[0]);
r = await call("write_file", { ...sid, path: "/etc/exg-mcp-test", content: "x" });
ok(r.isError && /EROFS|EACCES|EPERM/.test(r.content[0].text), "write outside the writable paths: refused in the sandbox", r.content[0]);
r = await call("read_file", { ...sid, path: "/etc/shadow" });
ok(r.isError || r.structuredContent?.content === "", "the host's /etc/shadow: unreadable", r.content?.[0]);

// ---- background ----
await checkBackground(call, sid);

// ---- a refusal comes back in the result ----
r = await call("run_command", { ...sid, command: "curl -s -o /dev/null -w '%{http_code}' http://blocked.example.invalid/ ; echo" , timeout_seconds: 20 });
let s = r.structuredContent;
ok(s && s.stdout.trim() === "403" && s.refusals.some((x) => x.event === "egress" && /blocked\.example\.invalid/.test(x.summary) && /refused/.test(x.summary)),
  "egress refused: the 403 and the refusal in the result", s);

// ---- evidence (about a minute: only with EXG_MCP_EVIDENCE=1) ----
if (process.env.EXG_MCP_EVIDENCE === "1") {
  let progress = 0;
  r = await call("evidence", sid, { timeout: 120000, resetTimeoutOnProgress: true, onprogress: () => progress++ });
  s = r.structuredContent;
  ok(s && s.passed === true && s.counts.escaped === 0 && s.probes.length > 50 && s.layer === "process", "evidence: the escape test held", s && { ...s, probes: s.probes.length });
  ok(progress > 0, "evidence: progress notifications while it ran", progress);
}

// ---- a git hook planted in a nested repository: quarantined at the end, reported by destroy ----
r = await call("run_command", { ...sid, command: "mkdir -p nested && cd nested && git init -q && echo 'echo pwned' > .git/hooks/post-checkout && echo planted" });
ok(r.structuredContent?.stdout === "planted\n", "a hook written into a nested repository created in the sandbox", r.structuredContent);

// ---- destroy; nothing left ----
r = await call("destroy_sandbox", sid);
ok(r.structuredContent?.destroyed === true && Array.isArray(r.structuredContent.refusals), "destroy_sandbox", r.structuredContent);
ok(r.structuredContent?.refusals?.some((x) => x.event === "planted" && /nested\/\.git\/hooks\/post-checkout/.test(x.summary) && /quarantined/.test(x.summary)),
  "destroy_sandbox reports the planted hook quarantined", r.structuredContent?.refusals);
r = await call("run_command", { ...sid, command: "true" });
ok(r.isError && /no such sandbox/.test(r.content[0].text), "a destroyed sandbox is gone", r.content[0]);
r = await call("list_sandboxes", {});
ok(r.structuredContent?.sandboxes?.length === 0, "list_sandboxes: none left", r.structuredContent);
// One left running for the server's end to take down (client close).
r = await call("create_sandbox", {});
ok(!r.isError, "a second sandbox, left for the server's exit to destroy", r);
console.log(`left_running ${r.structuredContent?.sandbox_id}`);
await client.close();
console.log(`${counts.passed} passed, ${counts.failed} failed`);
process.exit(counts.failed ? 1 : 0);
