#!/usr/bin/env bash
# `exguardian mcp` (issue 15): the MCP server over stdio. First raw JSON-RPC lines piped in
# (malformed JSON, a batch, unknown methods and tools, bad arguments: one error reply each,
# and the server keeps answering); then the official MCP TypeScript SDK's client
# (@modelcontextprotocol/sdk from npm, pinned, installed into a temp dir) over its stdio
# transport: tools and schemas, a sandbox, commands (exit status, stdout/stderr apart,
# truncation, timeout, cancellation), files, a background command, an egress refusal in the
# result, destroy; and that nothing is left when the client goes away.
source "$(dirname "$0")/lib.sh"

SDK_VERSION=1.32.2
need_source_tree tests/mcp/sdk_client.mjs node npm jq
STATE=$T/mcp-state
mkdir -m 700 "$STATE"
mkdir -p "$T/ws"

# ---- raw JSON-RPC: one reply per bad line, the session goes on ----
INIT='{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":"2025-11-25","capabilities":{},"clientInfo":{"name":"sh","version":"0"}}}'
# Lines nested 200 000 levels deep (1.2 MB): copying or printing such a value recurses once
# per level, which overflowed the server's stack before the nesting bound.
DEEP_ARRAY=$(python3 -c 'print("[" * 200000 + "]" * 200000)')
DEEP_PARAMS=$(python3 -c 'print("{\"jsonrpc\":\"2.0\",\"id\":12,\"method\":\"ping\",\"params\":" + "{\"a\":" * 200000 + "1" + "}" * 200001)')
run timeout 30 "$EXG" mcp --state-dir "$STATE" < <(printf '%s\n' \
    "$INIT" \
    '{"jsonrpc":"2.0","method":"notifications/initialized"}' \
    '{"jsonrpc":"2.0","id":2,"method":"tools/list"' \
    '[{"jsonrpc":"2.0","id":3,"method":"ping"}]' \
    '{"jsonrpc":"1.0","id":4,"method":"ping"}' \
    '{"jsonrpc":"2.0","id":5,"method":"no/such/method"}' \
    '{"jsonrpc":"2.0","id":6,"method":"tools/call","params":{"name":"rm_rf","arguments":{}}}' \
    '{"jsonrpc":"2.0","id":7,"method":"tools/call","params":{"name":"run_command","arguments":{"sandbox_id":"x"}}}' \
    '{"jsonrpc":"2.0","id":8,"method":"tools/call","params":{"name":"read_file","arguments":{"sandbox_id":"x","path":7}}}' \
    '{"jsonrpc":"2.0","id":9,"method":"tools/call","params":{"name":"write_file","arguments":{"sandbox_id":"x","path":"a","content":"!!","encoding":"base64"}}}' \
    '{"jsonrpc":"2.0","method":"notifications/cancelled","params":{"requestId":99}}' \
    '"just a string"' \
    "$DEEP_ARRAY" \
    "$DEEP_PARAMS" \
    '{"jsonrpc":"2.0","id":10,"method":"ping"}' \
    '{"jsonrpc":"2.0","id":11,"method":"tools/list"}')
reply() { jq -c "select(.id == $1)" <<<"$OUT"; }
code_of() { jq -r "select(.id == $1) | .error.code" <<<"$OUT"; }
[ "$STATUS" -eq 0 ] && ok "stdin's end ends the server (exit 0)" || { fail "the server's exit: $STATUS"; show_last; }
[ "$(reply 1 | jq -r .result.protocolVersion)" = 2025-11-25 ] && ok "initialize: protocol revision 2025-11-25" || fail "initialize: $(reply 1)"
[ "$(jq -r 'select(.id == null) | .error.code' <<<"$OUT" | sort | tr '\n' ' ')" = "-32600 -32600 -32700 -32700 -32700 " ] &&
    ok "malformed JSON and lines nested 200 000 deep: -32700; a batch and a bare string: -32600 (id null)" || fail "id-less errors: $(jq -c 'select(.id == null)' <<<"$OUT")"
[ "$(jq -r 'select(.id == null) | .error.message' <<<"$OUT" | grep -c 'nested more than 256 levels deep')" = 2 ] &&
    ok "the deep lines' errors name the nesting" || fail "deep lines: $(jq -c 'select(.id == null)' <<<"$OUT")"
[ "$(code_of 4)" = -32600 ] && ok "jsonrpc 1.0: -32600" || fail "jsonrpc 1.0: $(reply 4)"
[ "$(code_of 5)" = -32601 ] && ok "an unknown method: -32601" || fail "unknown method: $(reply 5)"
reply 6 | jq -e '.error.code == -32602 and (.error.message | test("Unknown tool: rm_rf"))' >/dev/null && ok "an unknown tool: -32602 naming it" || fail "unknown tool: $(reply 6)"
reply 7 | jq -e '.error.code == -32602 and (.error.message | test("exactly one of"))' >/dev/null && ok "run_command without command or argv: -32602" || fail "no command: $(reply 7)"
reply 8 | jq -e '.error.code == -32602 and (.error.message | test("arguments.path: expected a string"))' >/dev/null && ok "path a number: -32602 naming it" || fail "path: $(reply 8)"
reply 9 | jq -e '.error.code == -32602 and (.error.message | test("not valid base64"))' >/dev/null && ok "bad base64: -32602" || fail "base64: $(reply 9)"
[ "$(reply 10 | jq -c .result)" = '{}' ] && ok "ping after all of that" || fail "ping: $(reply 10)"
[ "$(reply 11 | jq '.result.tools | length')" = 12 ] && ok "tools/list after all of that: 12 tools" || fail "tools/list: $(reply 11 | head -c 300)"
[ "$(jq -s length <<<"$OUT")" = 14 ] && ok "one reply per request and per bad line, none for notifications" || fail "replies: $(jq -s length <<<"$OUT")"
[ -z "$(ls -A "$STATE")" ] && ok "the server's state is gone after it" || fail "left in the state dir: $(ls -A "$STATE")"

# ---- kill -9 of the server: its sandboxes end with it; the next server removes what it left ----
coproc MCP { exec "$EXG" mcp --state-dir "$STATE" 2>"$T/k9.err"; }
K9_PID=$MCP_PID
track_bg "$K9_PID"
echo '{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"create_sandbox","arguments":{}}}' >&"${MCP[1]}"
line=""
read -t 60 -r line <&"${MCP[0]}"
if jq -e '.result.structuredContent.sandbox_id' <<<"$line" >/dev/null 2>&1; then
    sup=$(cat "$STATE"/*/sandboxes/*/supervisor.pid 2>/dev/null)
    kill -9 "$K9_PID"
    wait "$K9_PID" 2>/dev/null
    gone_sup() { [ -n "$sup" ] && ! kill -0 "$sup" 2>/dev/null; }
    wait_for 20 gone_sup && ok "kill -9 of the server: its sandbox's supervisor ended with it" || fail "supervisor $sup outlived the server"
    run timeout 30 "$EXG" mcp --state-dir "$STATE" </dev/null
    [ "$STATUS" -eq 0 ] && [ -z "$(ls -A "$STATE")" ] && ok "the next server removed what the killed one left" || fail "after kill -9: $STATUS, left: $(ls -A "$STATE")"
else
    fail "create_sandbox for the kill -9 check: ${line:0:300} $(tail -3 "$T/k9.err")"
    kill -9 "$K9_PID" 2>/dev/null
fi

# ---- the SDK ----
mkdir -p "$T/node"
cp "$SRC/tests/mcp/sdk_client.mjs" "$SRC/tests/mcp/sdk_checks.mjs" "$T/node/"
if npm_pinned "$T/node" "@modelcontextprotocol/sdk@$SDK_VERSION"; then
    ok "npm install @modelcontextprotocol/sdk@$SDK_VERSION"
    run env EXG="$EXG" STATE="$STATE" WS_ROOT="$T/ws" timeout 240 node "$T/node/sdk_client.mjs"
    printf '%s\n' "$OUT" | grep -E '^(ok|FAIL) ' | sed 's/^/#   sdk: /'
    if [ "$STATUS" -eq 0 ] && grep -q '^[0-9]* passed, 0 failed' <<<"$OUT"; then ok "the MCP SDK client: $(tail -1 <<<"$OUT")"
    else fail "the MCP SDK client (status $STATUS): $(tail -1 <<<"$OUT")"; show_last; fi
    LEFT=$(sed -n 's/^left_running //p' <<<"$OUT")
    gone() { ! pgrep -f -- "$STATE/" >/dev/null; }
    if wait_for 20 gone; then ok "the client's close ended the server and every supervisor (sandbox $LEFT among them)"
    else fail "processes left: $(pgrep -af -- "$STATE/")"; fi
    wait_for 10 test -z "$(ls -A "$STATE")" && ok "nothing left in the state dir" || fail "left in the state dir: $(find "$STATE" | head)"
    [ -z "$(ls -A "$T/ws" | grep -v -e '^bin.dat$' -e '^nested$')" ] && ok "the host workspace holds only what the test wrote" || fail "workspace: $(ls -A "$T/ws")"
    [ -d "$T/ws/nested/.git/hooks" ] && [ ! -e "$T/ws/nested/.git/hooks/post-checkout" ] &&
        ok "the planted hook is no longer in the host workspace" || fail "the planted hook: $(ls -la "$T/ws/nested/.git/hooks" 2>&1 | head -5)"
else
    fail "npm install @modelcontextprotocol/sdk@$SDK_VERSION"; sed 's/^/#   /' "$T/node/npm.log" | tail -5
fi
finish
