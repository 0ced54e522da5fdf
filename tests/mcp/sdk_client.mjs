// Drives `exguardian mcp` with the official MCP TypeScript SDK's client over
// its stdio transport (tests/mcp/test_mcp.sh installs the pinned SDK).
// Env: EXG (the binary), WS_ROOT (a host directory the server may mount), STATE (its --state-dir).
// Prints "ok ..." / "FAIL ..." lines and "N passed, M failed".
import { Client } from "@modelcontextprotocol/sdk/client/index.js";
import { StdioClientTransport } from "@modelcontextprotocol/sdk/client/stdio.js";

let passed = 0, failed = 0;
const ok = (cond, what, detail) => {
  if (cond) { passed++; console.log(`ok ${what}`); }
  else { failed++; console.log(`FAIL ${what}${detail === undefined ? "" : ": " + JSON.stringify(detail).slice(0, 600)}`); }
};
const call = (name, args, opts) => client.callTool({ name, arguments: args }, undefined, opts);
async function rpcError(p) {
  try { await p; return null; } catch (e) { return e; }
}

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

r = await call("run_command", { ...sid, command: "echo out; echo err >&2; exit 3" });
let s = r.structuredContent;
ok(s && s.exit_code === 3 && s.stdout === "out\n" && s.stderr === "err\n" && !s.timed_out, "run_command: exit code 3, stdout and stderr apart", s);
r = await call("run_command", { ...sid, argv: ["id", "-u"] });
s = r.structuredContent;
ok(s && s.exit_code === 0 && /^[0-9]+\n$/.test(s.stdout) && s.stdout !== "0\n", "argv, no shell: runs as an unprivileged uid", s);
r = await call("run_command", { ...sid, argv: ["cat"], stdin: "from stdin\n" });
ok(r.structuredContent?.stdout === "from stdin\n", "stdin reaches the command", r.structuredContent);
r = await call("run_command", { ...sid, command: "echo $GREETING; pwd", env: { GREETING: "hi" }, cwd: "/tmp" });
ok(r.structuredContent?.stdout === "hi\n/tmp\n", "env and cwd", r.structuredContent);
r = await call("run_command", { ...sid, command: "head -c 200000 /dev/zero | tr '\\0' a; echo tail >&2", max_output_bytes: 1000 });
s = r.structuredContent;
ok(s && s.stdout.length === 1000 && s.stdout_truncated && s.stdout_bytes === 200000 && !s.stderr_truncated && /stdout truncated: 1000 of 200000/.test(s.note),
  "output past max_output_bytes: truncated, counted, with a note", { ...s, stdout: s?.stdout?.length });
r = await call("run_command", { ...sid, command: "sleep 30", timeout_seconds: 1 });
s = r.structuredContent;
ok(s && s.timed_out === true && s.exit_code === 137 && s.signal === 9 && /timeout/.test(s.note), "timeout_seconds: killed, timed_out, 128+9", s);
const sleepers = "n=0; for p in /proc/[0-9]*; do [ \"$(cat $p/comm 2>/dev/null)\" = sleep ] && n=$((n+1)); done; echo $n";
r = await call("run_command", { ...sid, command: sleepers });
ok(r.structuredContent?.stdout === "0\n", "the timeout ended the shell's children too (no sleep left)", r.structuredContent);
r = await call("run_command", { ...sid, argv: ["no-such-program-here"] });
ok(r.isError && /ENOENT/.test(r.content[0].text), "a program that is not there: a tool error with ENOENT", r.content[0]);

// cancellation: the client gives up; the command is killed in the sandbox
const ac = new AbortController();
const pending = call("run_command", { ...sid, command: "sleep 40; echo" }, { signal: ac.signal });
setTimeout(() => ac.abort("test"), 700);
e = await rpcError(pending);
ok(e !== null, "an aborted call rejects on the client (notifications/cancelled sent)");
let left = "1";
for (let i = 0; i < 40 && left !== "0"; i++) {
  r = await call("run_command", { ...sid, command: sleepers });
  left = r.structuredContent?.stdout?.trim();
  if (left !== "0") await new Promise((res) => setTimeout(res, 100));
}
ok(left === "0", "the cancelled command was killed inside the sandbox", left);

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
r = await call("start_command", { ...sid, command: "echo started; sleep 1; echo done; echo e >&2; exit 4" });
const pid = r.structuredContent?.pid;
ok(Number.isInteger(pid), "start_command returns a pid", r);
r = await call("list_sandboxes", {});
ok(r.structuredContent?.sandboxes?.some((x) => x.sandbox_id === id && x.background_commands.includes(pid)), "list_sandboxes shows it running", r.structuredContent);
r = await call("read_output", { ...sid, pid, wait_seconds: 20 });
s = r.structuredContent;
ok(s && s.running === false && s.exit_code === 4 && s.stdout === "started\ndone\n" && s.stderr === "e\n", "read_output waits for the exit: output and status", s);
r = await call("read_output", { ...sid, pid });
ok(r.structuredContent?.stdout === "", "read_output again: nothing new");
r = await call("start_command", { ...sid, argv: ["sleep", "60"] });
const pid2 = r.structuredContent?.pid;
r = await call("read_output", { ...sid, pid: pid2, kill: true });
ok(r.structuredContent?.running === false && r.structuredContent.signal === 9, "read_output kill: the background command ends", r.structuredContent);

// ---- a refusal comes back in the result ----
r = await call("run_command", { ...sid, command: "curl -s -o /dev/null -w '%{http_code}' http://blocked.example.invalid/ ; echo" , timeout_seconds: 20 });
s = r.structuredContent;
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
console.log(`${passed} passed, ${failed} failed`);
process.exit(failed ? 1 : 0);
