// Drives `exguardian mcp --server URL --api-key-file F` (client mode) with the official MCP
// TypeScript SDK's client over stdio, against the running `exguardian serve` that
// tests/mcp/test_mcp_client.sh started on loopback.
// Env: EXG (the binary), SERVER (its URL), KEY_FILE, BAD_KEY_FILE, KEY (to check it never shows), STATE (a --state-dir for
// the standalone server whose tools/list is compared).
// Prints "ok ..." / "FAIL ..." lines, "left_running ID" and "N passed, M failed".
import { Client } from "@modelcontextprotocol/sdk/client/index.js";
import { StdioClientTransport } from "@modelcontextprotocol/sdk/client/stdio.js";

import { checkBackground, checkCommands, counts, ok, rpcError, text } from "./sdk_checks.mjs";

async function connect(args) {
  const c = new Client({ name: "exguardian-test", version: "1.0.0" });
  await c.connect(new StdioClientTransport({ command: process.env.EXG, args: ["mcp", ...args], stderr: "inherit" }));
  return c;
}
// ---- the same tools and schemas as standalone ----
const standalone = await connect(["--state-dir", process.env.STATE]);
const want = (await standalone.listTools()).tools;
await standalone.close();
const client = await connect(["--server", process.env.SERVER, "--api-key-file", process.env.KEY_FILE]);
const call = (name, args, opts) => client.callTool({ name, arguments: args }, undefined, opts);
ok(client.getServerVersion()?.name === "exguardian", "initialize: serverInfo names exguardian", client.getServerVersion());
const { tools } = await client.listTools();
ok(tools.length === 12 && JSON.stringify(tools) === JSON.stringify(want), "tools/list: the twelve tools, schemas as standalone's",
  tools.map((t) => t.name));
let e = await rpcError(call("run_command", { sandbox_id: "x", command: "true", argv: ["true"] }));
ok(e && e.code === -32602, "bad arguments: -32602 as in standalone", e?.message);

// ---- a sandbox of the server ----
let r = await call("create_sandbox", { workspace: "/tmp" });
ok(r.isError && /workspace: not available in client mode/.test(text(r)), "create_sandbox workspace: refused, naming the option", text(r));
r = await call("create_sandbox", { layer: "container" });
ok(r.isError && /layer: not available in client mode.*template/.test(text(r)), "create_sandbox layer: refused, pointing to template", text(r));
r = await call("create_sandbox", { template: "nosuchtemplate" });
ok(r.isError && /404.*template nosuchtemplate not found/.test(text(r)), "an unknown template: the server's 404 in the error", text(r));
r = await call("create_sandbox", { timeout_seconds: 600 });
let s = r.structuredContent;
ok(!r.isError && typeof s?.sandbox_id === "string" && s.layer === "process" && s.template === "base" && s.workspace.startsWith("/") &&
  s.host_workspace === null && /^\d{4}-\d\d-\d\dT/.test(s.expires_at), "create_sandbox: sandbox_id, layer, template, workspace, expires_at", r);
const id = s?.sandbox_id;
const sid = { sandbox_id: id };

// ---- commands ----
r = await call("run_command", { ...sid, command: "echo out" });
s = r.structuredContent;
ok(s && Array.isArray(s.refusals) && s.refusals.length === 0 && s.note === undefined, "a command that met no refusal: refusals [], no note", s);
await checkCommands(call, sid);
r = await call("run_command", { ...sid, command: "env; cat /proc/1/environ 2>/dev/null | tr '\\0' '\\n'" });
ok(r.structuredContent && !r.structuredContent.stdout.includes(process.env.KEY), "the API key is nowhere in the sandbox's environment");

// ---- files ----
r = await call("write_file", { ...sid, path: "sub/dir/a.txt", content: "héllo\n" });
ok(r.isError && /make_parents/.test(text(r)), "write_file into a missing directory: an error (make_parents not asked)", text(r));
r = await call("write_file", { ...sid, path: "sub/dir/a.txt", content: "héllo\n", make_parents: true });
ok(!r.isError && r.structuredContent.bytes === 7, "write_file with make_parents", r);
r = await call("write_file", { ...sid, path: "sub/dir/a.txt", content: "more\n", append: true });
r = await call("read_file", { ...sid, path: "sub/dir/a.txt" });
ok(r.structuredContent?.content === "héllo\nmore\n" && r.structuredContent.encoding === "utf8" && r.structuredContent.eof &&
  r.structuredContent.size === 12, "read_file round trip (with an append)", r.structuredContent);
r = await call("read_file", { ...sid, path: "sub/dir/a.txt", offset: 7, length: 2 });
ok(r.structuredContent?.content === "mo" && r.structuredContent.eof === false, "read_file offset and length", r.structuredContent);
r = await call("run_command", { ...sid, command: "cat sub/dir/a.txt" });
ok(r.structuredContent?.stdout === "héllo\nmore\n", "the command sees the file written");
r = await call("write_file", { ...sid, path: "bin.dat", content: Buffer.from([0, 255, 1, 128]).toString("base64"), encoding: "base64", mode: "0600" });
r = await call("read_file", { ...sid, path: "bin.dat" });
ok(r.structuredContent?.encoding === "base64" && Buffer.from(r.structuredContent.content, "base64").equals(Buffer.from([0, 255, 1, 128])),
  "binary content comes back base64", r.structuredContent);
r = await call("stat_file", { ...sid, path: "bin.dat" });
ok(r.structuredContent?.type === "file" && r.structuredContent.size === 4 && r.structuredContent.mode === "0600" && r.structuredContent.mtime > 1.7e9,
  "stat_file: type, size, the mode asked, mtime", r.structuredContent);
r = await call("list_files", { ...sid, path: "sub/dir" });
ok(r.structuredContent?.entries?.length === 1 && r.structuredContent.entries[0].name === "a.txt" && r.structuredContent.entries[0].type === "file",
  "list_files", r.structuredContent);
r = await call("remove_file", { ...sid, path: "sub" });
ok(r.isError && /ENOTEMPTY/.test(text(r)), "remove_file of a non-empty directory without recursive: refused", text(r));
r = await call("remove_file", { ...sid, path: "sub", recursive: true });
ok(r.structuredContent?.removed === true, "remove_file recursive", r);
r = await call("stat_file", { ...sid, path: "sub" });
ok(r.isError && /not found/.test(text(r)), "removed: stat_file says not found", text(r));
r = await call("write_file", { ...sid, path: "/etc/exg-mcp-test", content: "x" });
ok(r.isError && /EROFS|EACCES|EPERM|403/.test(text(r)), "a write outside the writable paths: refused in the sandbox", text(r));

// ---- background ----
await checkBackground(call, sid);
r = await call("list_sandboxes", {});
ok(r.structuredContent?.sandboxes?.length === 1, "list_sandboxes: only this session's sandbox", r.structuredContent);

// ---- refusals: serve keeps the audit log; each refusal comes back once, with the call that met it ----
const refusedHost = (x, host) => x.event === "egress" && x.summary.includes(host) && /refused/.test(x.summary) && x.detail?.sandbox === undefined;
r = await call("run_command", { ...sid, command: "curl -s -o /dev/null -w '%{http_code}' http://blocked.example.invalid/ ; echo", timeout_seconds: 20 });
s = r.structuredContent;
ok(s && s.stdout.trim() === "403" && s.refusals.length === 1 && refusedHost(s.refusals[0], "blocked.example.invalid") && /1 refusal/.test(s.note),
  "egress refused: the 403 and the refusal in the result", s);
r = await call("run_command", { ...sid, command: "true" });
ok(r.structuredContent?.refusals?.length === 0, "the next command: that refusal is not reported again", r.structuredContent);
r = await call("start_command", { ...sid, command: "curl -s -o /dev/null http://second.example.invalid/; echo done" });
const bgPid = r.structuredContent?.pid;
r = await call("read_output", { ...sid, pid: bgPid, wait_seconds: 20 });
ok(r.structuredContent?.running === false && r.structuredContent.refusals.some((x) => refusedHost(x, "second.example.invalid")),
  "read_output: the background command's refusal", r.structuredContent);
r = await call("start_command", { ...sid, command: "curl -s -o /dev/null http://third.example.invalid/; echo > third.done; sleep 600" });
// Waited for with stat_file, which takes no refusals: the destroy below is the first call after it.
for (let i = 0; i < 200 && (await call("stat_file", { ...sid, path: "third.done" })).isError; i++) await new Promise((res) => setTimeout(res, 100));

r = await call("evidence", sid);
ok(r.isError && /standalone mode/.test(text(r)), "evidence: an error saying it runs in standalone mode", text(r));

// ---- destroy ----
r = await call("destroy_sandbox", sid);
ok(r.structuredContent?.destroyed === true && Array.isArray(r.structuredContent.refusals), "destroy_sandbox", r);
ok(r.structuredContent?.refusals?.some((x) => refusedHost(x, "third.example.invalid")) && r.structuredContent.note === undefined,
  "destroy_sandbox: the refusals no call had reported yet", r.structuredContent);
r = await call("run_command", { ...sid, command: "true" });
ok(r.isError && /no such sandbox/.test(text(r)), "a destroyed sandbox is gone", text(r));
r = await call("list_sandboxes", {});
ok(r.structuredContent?.sandboxes?.length === 0, "list_sandboxes: none left", r.structuredContent);

// ---- a bad key, a server that is not there: clear tool errors, the session goes on ----
const bad = await connect(["--server", process.env.SERVER, "--api-key-file", process.env.BAD_KEY_FILE]);
r = await bad.callTool({ name: "create_sandbox", arguments: {} });
ok(r.isError && /refused the API key \(401: invalid X-API-KEY\).*--api-key-file/.test(text(r)), "a bad key: create_sandbox says the key was refused", text(r));
r = await bad.callTool({ name: "list_sandboxes", arguments: {} });
ok(r.isError && /401/.test(text(r)), "a bad key: list_sandboxes too", text(r));
await bad.close();
const nowhere = `unix:${process.env.STATE}/no-such-serve.sock`;  // no port of this machine is tried
const gone = await connect(["--server", nowhere, "--api-key-file", process.env.KEY_FILE]);
r = await gone.callTool({ name: "create_sandbox", arguments: {} });
ok(r.isError && /cannot connect/.test(text(r)) && text(r).includes(nowhere), "no server: a tool error saying it cannot connect", text(r));
await gone.ping();
ok(true, "the session goes on after it");
await gone.close();

// One left running for the client's close to destroy.
r = await call("create_sandbox", {});
ok(!r.isError, "a second sandbox, left for the session's end to destroy", r);
console.log(`left_running ${r.structuredContent?.sandbox_id}`);
await client.close();
console.log(`${counts.passed} passed, ${counts.failed} failed`);
process.exit(counts.failed ? 1 : 0);
