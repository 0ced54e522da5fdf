// What both modes of `exguardian mcp` must do alike, checked through the MCP SDK's client:
// standalone (sdk_client.mjs) and client mode (sdk_remote_client.mjs) import these. `call(name,
// args, opts)` is the script's tools/call; `sid` is {sandbox_id} of a sandbox it created.
export const counts = { passed: 0, failed: 0 };
export function ok(cond, what, detail) {
  if (cond) { counts.passed++; console.log(`ok ${what}`); }
  else { counts.failed++; console.log(`FAIL ${what}${detail === undefined ? "" : ": " + JSON.stringify(detail).slice(0, 600)}`); }
}
export async function rpcError(p) {
  try { await p; return null; } catch (e) { return e; }
}
export const text = (r) => r?.content?.[0]?.text ?? "";
// How many `sleep` processes the sandbox holds: what a killed shell line left running.
const sleepers = "n=0; for p in /proc/[0-9]*; do [ \"$(cat $p/comm 2>/dev/null)\" = sleep ] && n=$((n+1)); done; echo $n";

// run_command: exit status, stdout and stderr apart, argv, stdin, env and cwd, truncation, the
// timeout (the shell's children too), cancellation, a program that is not there.
export async function checkCommands(call, sid) {
  let r = await call("run_command", { ...sid, command: "echo out; echo err >&2; exit 3" });
  let s = r.structuredContent;
  ok(s && s.exit_code === 3 && s.stdout === "out\n" && s.stderr === "err\n" && !s.timed_out && s.signal === null,
    "run_command: exit code 3, stdout and stderr apart", r);
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
  r = await call("run_command", { ...sid, command: "sleep 30; echo never", timeout_seconds: 1 });
  s = r.structuredContent;
  ok(s && s.timed_out === true && s.exit_code === 137 && s.signal === 9 && s.stdout === "" && /killed after its timeout of 1(\.0)? s/.test(s.note),
    "timeout_seconds: killed, timed_out, 128+9", s);
  r = await call("run_command", { ...sid, command: sleepers });
  ok(r.structuredContent?.stdout === "0\n", "the timeout ended the shell's children too (no sleep left)", r.structuredContent);
  r = await call("run_command", { ...sid, argv: ["no-such-program-here"] });
  ok(r.isError && /ENOENT/.test(text(r)), "a program that is not there: a tool error with ENOENT", text(r));

  // cancellation: the client gives up; the command is killed in the sandbox
  const ac = new AbortController();
  const pending = call("run_command", { ...sid, command: "sleep 40; echo" }, { signal: ac.signal });
  setTimeout(() => ac.abort("test"), 700);
  ok((await rpcError(pending)) !== null, "an aborted call rejects on the client (notifications/cancelled sent)");
  let left = "1";
  for (let i = 0; i < 40 && left !== "0"; i++) {
    r = await call("run_command", { ...sid, command: sleepers });
    left = r.structuredContent?.stdout?.trim();
    if (left !== "0") await new Promise((res) => setTimeout(res, 100));
  }
  ok(left === "0", "the cancelled command was killed inside the sandbox", left);
}

// start_command, list_sandboxes showing it, read_output (waiting for the exit, again, kill).
export async function checkBackground(call, sid) {
  let r = await call("start_command", { ...sid, command: "echo started; sleep 1; echo done; echo e >&2; exit 4" });
  const pid = r.structuredContent?.pid;
  ok(Number.isInteger(pid), "start_command returns a pid", r);
  r = await call("list_sandboxes", {});
  ok(r.structuredContent?.sandboxes?.some((x) => x.sandbox_id === sid.sandbox_id && x.background_commands.includes(pid)),
    "list_sandboxes shows it running", r.structuredContent);
  r = await call("read_output", { ...sid, pid, wait_seconds: 20 });
  const s = r.structuredContent;
  ok(s && s.running === false && s.exit_code === 4 && s.stdout === "started\ndone\n" && s.stderr === "e\n", "read_output waits for the exit: output and status", s);
  r = await call("read_output", { ...sid, pid });
  ok(r.structuredContent?.stdout === "", "read_output again: nothing new");
  r = await call("start_command", { ...sid, argv: ["sleep", "60"] });
  r = await call("read_output", { ...sid, pid: r.structuredContent?.pid, kill: true });
  ok(r.structuredContent?.running === false && r.structuredContent.signal === 9, "read_output kill: the background command ends", r.structuredContent);
}
