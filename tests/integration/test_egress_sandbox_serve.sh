#!/usr/bin/env bash
# Egress of sandboxes made through `exguardian serve` (issue 14), inside the test world of
# network namespaces (run.sh builds it: tests/integration/egress_world.sh; the server listens
# on the client namespace's loopback): network.allowOut names the hosts a sandbox may reach,
# network.denyOut beats it, no allowOut means no network, and nothing refused reaches the
# world's servers. PUT /sandboxes/{id}/network replaces a running sandbox's rules; the audit
# log says each decision and change, every line tagged with the tenant and the E2B sandbox id.
source "$(dirname "$0")/lib.sh"

need_source_tree tests/integration/envd_start.py curl jq python3
KEY=egress-$(od -An -N12 -tx1 /dev/urandom | tr -d ' \n')
# Tenant s has a secret of its own (the tenants file's "secrets"): its sandboxes hold a placeholder.
KEY_S=secret-$(od -An -N12 -tx1 /dev/urandom | tr -d ' \n')
TVAL=exgtenant-$(od -An -N12 -tx1 /dev/urandom | tr -d ' \n')
printf '%s' "$TVAL" > "$T/tenant-token"; chmod 600 "$T/tenant-token"
cat > "$T/tenants.json" <<JSON
{"tenants": [{"id": "t", "keys": ["$("$EXG" serve --hash-key "$KEY")"]},
             {"id": "s", "keys": ["$("$EXG" serve --hash-key "$KEY_S")"],
              "secrets": [{"name": "TENANT_TOKEN", "from": "file:$T/tenant-token", "hosts": ["api.secret.test"]}]}]}
JSON
# A template's own policy file and allowDomains: both in force, the policy's deniedDomains too.
echo '{"network": {"allowedDomains": ["other.test", "denied.test"], "deniedDomains": ["denied.test"]}}' > "$T/policy.json"
echo "{\"templates\": {\"policied\": {\"policy\": \"$T/policy.json\", \"allowDomains\": [\"allowed.test\"]}}}" > "$T/templates.json"
"$EXG" serve --listen 127.0.0.1:0 --tenants "$T/tenants.json" --templates "$T/templates.json" --state-dir "$T/state" > "$T/serve.log" 2>&1 &
SERVER_PID=$!
track_bg "$SERVER_PID"
wait_for 10 bash -c "grep -q 'listening on 127.0.0.1:' '$T/serve.log' || ! kill -0 $SERVER_PID 2>/dev/null"
if [ "$EXG_AS" = user ] && ! kill -0 "$SERVER_PID" 2>/dev/null && grep -q 'cgroup limits: cannot be enforced' "$T/serve.log"; then
    ok "as $EXG_AS without writable cgroups: serve refuses to start, with the reason (fail closed)"
    skip "the egress checks run as root (as $EXG_AS, test_serve.sh covers --no-cgroup-limits)"
    finish
fi
grep -q 'listening on 127.0.0.1:' "$T/serve.log" || { fail "the server did not start"; note "$(cat "$T/serve.log")"; finish; }
URL=http://127.0.0.1:$(sed -n 's/.*listening on 127.0.0.1:\([0-9]*\).*/\1/p' "$T/serve.log")

# create BODY: sets ID and TOKEN (or CODE/BODY on failure).
create() {
    BODY=$(curl -s -w '\n%{http_code}' -X POST "$URL/sandboxes" -H "X-API-KEY: $KEY" -H 'Content-Type: application/json' -d "$1")
    CODE=${BODY##*$'\n'}; BODY=${BODY%$'\n'*}
    ID=$(jq -r '.sandboxID // empty' <<<"$BODY"); TOKEN=$(jq -r '.envdAccessToken // empty' <<<"$BODY")
}
# in_sandbox SHELL-LINE: runs it through process.Process/Start; sets OUT (stdout+stderr) and STATUS.
in_sandbox() {
    python3 "$SRC/tests/integration/envd_start.py" "$URL" "$ID" "$TOKEN" "$1" > "$T/run.out"
    STATUS=$(sed -n 's/^#status //p' "$T/run.out")
    OUT=$(grep -v '^#status ' "$T/run.out") ERR=""
}
# refused_in_sandbox WHY DESC SHELL-LINE: the sandbox ran LINE (after the mark) and it was
# refused with WHY (lib.sh's last_refused; a process that never started has no status).
refused_in_sandbox() { in_sandbox "echo $RAN_MARK; $3"; last_refused "$1" "" "$2"; }
# curl -f's line for the proxy's 403.
REFUSED_403='curl: \(22\) The requested URL returned error: 403'
C="curl -sS -m 10"

create '{"templateID": "base", "network": {"allowOut": ["allowed.test", "denied.test"], "denyOut": ["denied.test"]}}'
[ "$CODE" = 201 ] && ok "create with network.allowOut and denyOut" || { fail "create: $CODE $BODY"; finish; }
before=$(cat "$EGW_LOG" 2>/dev/null | wc -l)
in_sandbox "$C http://allowed.test/"
[ "$STATUS" = 0 ] && grep -q "hello from 203.0.113.10" <<<"$OUT" && ok "allowOut: allowed.test reached through the sandbox's proxy" ||
    { fail "allowed.test: status $STATUS"; note "$OUT"; }
refused_in_sandbox "$REFUSED_403" "a host not in allowOut: other.test" "$C -f http://other.test/"
refused_in_sandbox "$REFUSED_403" "denyOut beats allowOut: denied.test" "$C -f http://denied.test/"
# Transparent capture: a direct connection reaches the proxy, which judges the literal address
# (no CIDR rule allows it) and closes without a reply.
refused_in_sandbox 'curl: \((52|56)\)' "no way around the proxy (a direct connection is captured and refused)" \
    "$C -f --noproxy '*' http://203.0.113.10/"
check "only the allowed request reached the world's servers" bash -c "[ \$(grep -c . '$EGW_LOG' 2>/dev/null || echo 0) -eq $((before + 1)) ]"
check "no request of other.test or denied.test arrived" bash -c "! grep -qE 'host=(other|denied)' '$EGW_LOG'"
first_id=$ID

# PUT /sandboxes/{id}/network replaces the running sandbox's rules (the supervisor's set_network).
# put_network BODY: sets PCODE and PBODY.
put_network() {
    PBODY=$(curl -s -w '\n%{http_code}' -X PUT "$URL/sandboxes/$ID/network" -H "X-API-KEY: $KEY" -H 'Content-Type: application/json' -d "$1")
    PCODE=${PBODY##*$'\n'}; PBODY=${PBODY%$'\n'*}
}
AUDIT=$T/state/sandboxes/$first_id/audit.jsonl
put_network '{"allowOut": ["allowed.test", "other.test"]}'
[ "$PCODE" = 204 ] && ok "PUT network: other.test added (204)" || fail "PUT network: $PCODE $PBODY"
in_sandbox "$C -f http://other.test/"
[ "$STATUS" = 0 ] && grep -q "hello from 203.0.113.10" <<<"$OUT" && ok "after the PUT: other.test, refused before, reached" ||
    { fail "other.test after the PUT: status $STATUS"; note "$OUT"; }
refused_in_sandbox "$REFUSED_403" "denied.test is no longer in allowOut" "$C -f http://denied.test/"
check "GET shows the new rules" bash -c "curl -s '$URL/sandboxes/$ID' -H 'X-API-KEY: $KEY' | jq -e '.network.allowOut == [\"allowed.test\", \"other.test\"] and .network.denyOut == []'"
put_network '{"allowOut": ["allowed.test"]}'
[ "$PCODE" = 204 ] || fail "second PUT network: $PCODE $PBODY"
refused_in_sandbox "$REFUSED_403" "after a second PUT without it: other.test refused again" "$C -f http://other.test/"
for body in 'nope' '[]' '{"allowOut": "other.test"}' '{"allowOut": [7]}' '{"allowOut": ["bad host!"]}' \
            '{"allowOut": ["10.0.0.0/8"]}' '{"denyOut": ["bad host!"]}' '{"rules": {}}' '{"allowOut": ["a.test"], "allow_internet_access": false}' \
            '{"allowOut": [], "whatever": 1}'; do
    put_network "$body"
    if [ "$PCODE" = 400 ] && jq -e '.message | length > 0' <<<"$PBODY" >/dev/null; then ok "PUT network $body: 400 ($(jq -r .message <<<"$PBODY"))"
    else fail "PUT network $body: $PCODE $PBODY"; fi
done
in_sandbox "$C -f http://allowed.test/"
[ "$STATUS" = 0 ] && grep -q "hello from 203.0.113.10" <<<"$OUT" && ok "the refused PUTs changed nothing: allowed.test still reached" || fail "allowed.test after bad PUTs: status $STATUS"
refused_in_sandbox "$REFUSED_403" "... and other.test still refused" "$C -f http://other.test/"
# A tunnel open at a change is cut (docs/agent-protocol.md): the sandbox holds a CONNECT tunnel
# to allowed.test, the rules drop it, the next request through that tunnel gets nothing.
HOME_DIR=$T/state/sandboxes/$first_id/home
put_network '{"allowOut": ["allowed.test"]}'
[ "$PCODE" = 204 ] || fail "PUT network before the tunnel: $PCODE $PBODY"
in_sandbox "python3 -c '
import os, socket, time, urllib.parse
p = urllib.parse.urlparse(os.environ[\"http_proxy\"])
s = socket.create_connection((p.hostname, p.port), timeout=20)
s.sendall(b\"CONNECT allowed.test:80 HTTP/1.1\r\nHost: allowed.test:80\r\n\r\n\")
head = s.recv(4096)
print(\"tunnel:\", head.split(b\"\r\n\")[0].decode())
open(\"tunnel-open\", \"w\").close()
for _ in range(200):
    if os.path.exists(\"rules-changed\"): break
    time.sleep(0.1)
try:
    s.sendall(b\"GET / HTTP/1.1\r\nHost: allowed.test\r\nConnection: close\r\n\r\n\")
    got = s.recv(4096)
except OSError as e:
    got = b\"\"
print(\"after the change:\", \"answered\" if got else \"cut\")
'" > /dev/null &
TUNNEL_PID=$!
wait_for 20 test -e "$HOME_DIR/tunnel-open" || fail "the sandbox's tunnel did not open"
put_network '{"allowOut": ["other.test"]}'
[ "$PCODE" = 204 ] || fail "PUT network under the tunnel: $PCODE $PBODY"
touch "$HOME_DIR/rules-changed"
wait "$TUNNEL_PID"
OUT=$(cat "$T/run.out")
grep -q "tunnel: HTTP/1.1 200" <<<"$OUT" && grep -q "after the change: cut" <<<"$OUT" &&
    ok "a tunnel to allowed.test open at a change that drops it: cut" || { fail "the tunnel after the change"; note "$OUT"; }
check "audit: that change says it cut one connection" bash -c \
    "jq -s -e '[.[] | select(.event == \"egress_rules_changed\")] | last | .allow == [\"other.test\"] and .cut == 1' '$AUDIT' >/dev/null"
put_network '{"allowOut": ["allowed.test"]}'
[ "$PCODE" = 204 ] || fail "PUT network after the tunnel: $PCODE $PBODY"
rm -f "$HOME_DIR/tunnel-open" "$HOME_DIR/rules-changed"

check "the world's servers saw other.test exactly once" bash -c "[ \$(grep -c 'host=other' '$EGW_LOG') -eq 1 ]"
check "audit: each rule change, with its lists and how many connections it cut" bash -c \
    "jq -s -e '[.[] | select(.event == \"egress_rules_changed\") | {allow, deny, cut}] ==
               [{\"allow\": [\"allowed.test\", \"other.test\"], \"deny\": [], \"cut\": 0}, {\"allow\": [\"allowed.test\"], \"deny\": [], \"cut\": 0},
                {\"allow\": [\"allowed.test\"], \"deny\": [], \"cut\": 0}, {\"allow\": [\"other.test\"], \"deny\": [], \"cut\": 1},
                {\"allow\": [\"allowed.test\"], \"deny\": [], \"cut\": 0}]' '$AUDIT' >/dev/null"
check "audit: other.test refused, then allowed, then refused" bash -c \
    "[ \"\$(jq -r 'select(.event == \"egress\" and .host == \"other.test\") | .decision' '$AUDIT' | tr '\n' ' ')\" = 'refused allowed refused refused ' ]"
check "audit: every line carries the tenant and the E2B sandbox id" bash -c \
    "[ -s '$AUDIT' ] && jq -e -s 'all(.tenant == \"t\" and .e2b_sandbox == \"$first_id\")' '$AUDIT' >/dev/null"

create '{"templateID": "base"}'
[ "$CODE" = 201 ] || fail "create without network: $CODE"
refused_in_sandbox "$REFUSED_403" "no allowOut: no network, not even allowed.test" "$C -f http://allowed.test/"
put_network '{"allowOut": ["allowed.test"]}'
[ "$PCODE" = 204 ] || fail "PUT network on a sandbox made without allowOut: $PCODE $PBODY"
in_sandbox "$C -f http://allowed.test/"
[ "$STATUS" = 0 ] && grep -q "hello from 203.0.113.10" <<<"$OUT" && ok "a sandbox made without network gets allowed.test by a PUT" ||
    { fail "allowed.test after the PUT on the second sandbox: status $STATUS"; note "$OUT"; }

create '{"templateID": "policied"}'
[ "$CODE" = 201 ] && ok "create from a template with a policy file and allowDomains" || fail "create policied: $CODE $BODY"
in_sandbox "$C -f http://allowed.test/ && $C -f http://other.test/"
[ "$STATUS" = 0 ] && [ "$(grep -c 'hello from 203.0.113.10' <<<"$OUT")" = 2 ] &&
    ok "template: allowed.test (its allowDomains) and other.test (its policy's allowedDomains) reached" ||
    { fail "template egress: status $STATUS"; note "$OUT"; }
in_sandbox "$C -f http://denied.test/"
[ "$STATUS" != 0 ] && ok "template: denied.test refused (the policy's deniedDomains beats its allowedDomains)" || fail "denied.test reached from the template's sandbox"
put_network '{"allowOut": ["denied.test"]}'
[ "$PCODE" = 409 ] && jq -e '.message | test("policy")' <<<"$PBODY" >/dev/null &&
    ok "PUT network on a template with its own policy: 409 (its rules are fixed)" || fail "PUT network on the policied sandbox: $PCODE $PBODY"
check "template: the audit log says each decision (denied.test refused, the others allowed)" bash -c \
    "jq -s -e '[.[] | select(.event == \"egress\") | {host, decision}] | (map(select(.decision == \"allowed\") | .host) | sort) == [\"allowed.test\", \"other.test\"] and
               (map(select(.decision == \"refused\") | .host) == [\"denied.test\"])' '$T/state/sandboxes/$ID/audit.jsonl' >/dev/null"

check "the audit log of the first sandbox has the refusals" \
    bash -c "grep -q other.test '$T/state/sandboxes/$first_id/audit.jsonl' && grep -q denied.test '$T/state/sandboxes/$first_id/audit.jsonl'"

# ---- network.rules: headers the proxy sets on HTTPS requests to a host; the value never inside ----
# (The world's HTTPS echo servers, tests/integration/egress_world_secrets.sh, log every request's
# headers to $SLOG and answer with them: the proxy masks the value in that echo.)
SLOG=$(dirname "$EGW_LOG")/secrets.log
VALUE="exgrule-$(rnd)$(rnd)"; WILD="exgwild-$(rnd)"
rules_body() {  # ALLOW-LIST RULES-JSON
    printf '{"templateID": "base", "network": {"allowOut": %s, "rules": %s}}' "$1" "$2"
}
RULES="{\"api.secret.test\": [{\"transform\": {\"headers\": {\"Authorization\": \"Bearer $VALUE\"}}}, {\"transform\": {\"headers\": {\"X-Team\": \"team-blue\"}}}],
        \"*.secret.test\": [{\"transform\": {\"headers\": {\"X-Wild\": \"$WILD\"}}}]}"
create "$(rules_body '["api.secret.test", "*.secret.test", "plain.test"]' "$RULES")"
[ "$CODE" = 201 ] && ok "create with network.rules (an exact host and a wildcard)" || { fail "create with rules: $CODE $BODY"; }
rules_id=$ID; rules_token=$TOKEN
RAUDIT=$T/state/sandboxes/$rules_id/audit.jsonl
in_sandbox "$C https://api.secret.test/rule-exact -H 'Authorization: Bearer from-the-sandbox' -H 'x-team: mine'; echo; \
            $C https://other.secret.test/rule-wild; echo; $C https://plain.test/rule-none"
req() { grep -F "\"path\": \"$1\"" "$SLOG" || true; }
hdrs() { req "$1" | jq -c '[.headers[] | select(.[0] | test("^(authorization|x-team|x-wild)$"; "i"))] | sort'; }
[ "$(hdrs /rule-exact)" = "[[\"Authorization\",\"Bearer $VALUE\"],[\"X-Team\",\"team-blue\"]]" ] &&
    ok "api.secret.test received the rule's Authorization and X-Team, the sandbox's own replaced; no wildcard header (exact wins)" ||
    { fail "headers upstream at api.secret.test: $(hdrs /rule-exact)"; note "$OUT"; }
[ "$(hdrs /rule-wild)" = "[[\"X-Wild\",\"$WILD\"]]" ] && ok "other.secret.test received the *.secret.test rule's header only" ||
    fail "headers upstream at other.secret.test: $(hdrs /rule-wild)"
[ "$(hdrs /rule-none)" = "[]" ] && ok "plain.test (no rule) received none of them" || fail "headers upstream at plain.test: $(hdrs /rule-none)"
grep -qF '["Authorization", "exg_ph_E2B_RULE_' <<<"$OUT" && grep -qF '["X-Wild", "exg_ph_E2B_RULE_' <<<"$OUT" &&
    ! grep -qF -e "$VALUE" -e "$WILD" -e team-blue <<<"$OUT" &&
    ok "the upstreams' echo reached the sandbox with every value masked (placeholders in their place)" || { fail "the echo inside"; note "$OUT"; }
# Everything a command inside could read for it: its environment and every visible process's,
# command lines, its home, /tmp, /etc and the proxy's CA bundle; and the agent's own environment.
# (The values are searched for in two halves joined inside: this command line must not hold them.)
in_sandbox "R1=exgrule-; R2=${VALUE#exgrule-}; W1=exgwild-; W2=${WILD#exgwild-}; env; \
            cat /proc/[0-9]*/environ /proc/[0-9]*/cmdline 2>/dev/null | tr '\0' '\n'; \
            grep -rsF -e \"\$R1\$R2\" -e \"\$W1\$W2\" \$HOME /tmp /var/tmp /etc /run /dev/shm 2>/dev/null | head -3"
! grep -qF -e "$VALUE" -e "$WILD" <<<"$OUT" && grep -q '^PATH=' <<<"$OUT" &&
    ok "inside: the values are in no environment, command line or readable file" || { fail "a value is readable inside"; note "$OUT"; }
api_get() { curl -s "$URL/sandboxes/$1" -H "X-API-KEY: $KEY"; }
info=$(api_get "$rules_id")
jq -e '.network.rules["api.secret.test"][0].transform.headers | keys == ["Authorization", "X-Team"]' <<<"$info" >/dev/null &&
    ! grep -qF "$VALUE" <<<"$info" && ok "GET shows the rules' hosts and header names, never the values" || fail "GET rules: $info"
check "audit: the intercepted connection names the rules (E2B_RULE_n) and counts the headers set, never a value" bash -c \
    "jq -s -e '[.[] | select(.event == \"egress\" and .host == \"api.secret.test\" and .intercepted)] | length == 1 and
               (.[0].headers_set == 2) and (.[0].secrets | index(\"E2B_RULE_1\"))' '$RAUDIT' >/dev/null"
check "the values are in no file of the server's state dir (policy names env:, audit logs, homes)" \
    bash -c "! grep -rqsF -e '$VALUE' -e '$WILD' '$T/state' '$T/serve.log'"
# Bad rules, each a 400 naming what is wrong; nothing started.
for r in '"api.secret.test"' '{"api.secret.test": {}}' '{"nowhere.test": [{"transform": {"headers": {"A": "abcdef"}}}]}' \
         '{"api.secret.test": [{"transform": {"headers": {"Host": "evil.test"}}}]}' \
         '{"api.secret.test": [{"transform": {"headers": {"A": "ab\r\nX-Evil: 1"}}}]}' \
         '{"api.secret.test": [{"transform": {"headers": {"A": 5}}}]}' '{"api.secret.test": [{"transform": {"headers": {"A": "ab"}}}]}' \
         '{"api.secret.test": [{"transform": {"body": "x"}}]}' '{"10.0.0.0/8": []}' '{"*": []}' \
         '{"api.secret.test": [{"transform": {"headers": {"bad name": "abcdef"}}}]}'; do
    create "$(rules_body '["api.secret.test"]' "$r")"
    if [ "$CODE" = 400 ] && jq -e '.message | startswith("network.rules")' <<<"$BODY" >/dev/null; then ok "rules $r: 400 ($(jq -r .message <<<"$BODY"))"
    else fail "rules $r: $CODE $BODY"; fi
done
ID=$rules_id; TOKEN=$rules_token
put_network '{"allowOut": ["plain.test"]}'
[ "$PCODE" = 400 ] && jq -e '.message | test("E2B_RULE_.*keep allowing")' <<<"$PBODY" >/dev/null &&
    ok "a PUT that stops allowing a host with rules: 400 ($(jq -r .message <<<"$PBODY"))" || fail "PUT dropping a rules host: $PCODE $PBODY"
put_network '{"allowOut": ["api.secret.test", "*.secret.test"]}'
[ "$PCODE" = 204 ] || fail "PUT network on the rules sandbox: $PCODE $PBODY"
in_sandbox "$C https://api.secret.test/rule-after-put"
[ "$(hdrs /rule-after-put | jq -c 'map(.[0])')" = '["Authorization","X-Team"]' ] &&
    ok "a PUT without rules keeps them" || { fail "after a PUT without rules: $(hdrs /rule-after-put)"; note "$OUT"; }

# /metrics counts the decisions of the tenant's proxies from their audit logs, exactly.
audit_count() { cat "$T"/state/sandboxes/*/audit.jsonl | jq -s "[.[] | select(.event == \"egress\" or .event == \"dns\") | select($1)] | length"; }
metric() { curl -s "$URL/metrics" | awk -v k="$1" '$1 == k {print $2}'; }
want_refused=$(audit_count '.decision == "refused"'); want_allowed=$(audit_count '.decision == "allowed"')
got_refused=$(metric 'exguardian_egress_refusals_total{tenant="t"}')
got_allowed=$(curl -s "$URL/metrics" | awk '$1 ~ /^exguardian_egress_decisions_total\{tenant="t",.*decision="allowed"\}$/ {n += $2} END {print n + 0}')
[ "$want_refused" -ge 5 ] && [ "$got_refused" = "$want_refused" ] && [ "$got_allowed" = "$want_allowed" ] &&
    ok "/metrics: tenant t's egress refusals ($got_refused) and allowed connections ($got_allowed), as in the audit logs" ||
    fail "/metrics egress: refused $got_refused (audit $want_refused), allowed $got_allowed (audit $want_allowed)"
curl -s "$URL/metrics" | grep -q '^exguardian_egress_decisions_total{tenant="t",protocol="http",decision="refused"} [1-9]' &&
    ok "/metrics: decisions by tenant, protocol and decision" || fail "/metrics: no http refusals of tenant t"
# A sandbox that ends keeps its counts (its log is read before its directory goes).
curl -s -o /dev/null -X DELETE "$URL/sandboxes/$first_id" -H "X-API-KEY: $KEY"
after=$(metric 'exguardian_egress_refusals_total{tenant="t"}')
[ "$after" = "$got_refused" ] && ok "/metrics: the refusals of a killed sandbox stay counted" || fail "/metrics after the kill: $after, was $got_refused"

# ---- a tenant's secrets (tenants file): a placeholder inside, the value put in by the proxy ----
KEY_T=$KEY; KEY=$KEY_S
create '{"templateID": "base"}'
KEY=$KEY_T
[ "$CODE" = 201 ] && ok "tenant s: create (its secret's host reachable without allowOut)" || fail "tenant s create: $CODE $BODY"
s_id=$ID
in_sandbox "echo \"tok=\$TENANT_TOKEN\"; $C https://api.secret.test/tenant-secret -H \"Authorization: Bearer \$TENANT_TOKEN\"; echo; \
            echo $RAN_MARK; $C -f http://plain.test/tenant-other"
grep -q '^tok=exg_ph_TENANT_TOKEN' <<<"$OUT" && ! grep -qF "$TVAL" <<<"$OUT" &&
    ok "tenant s: \$TENANT_TOKEN inside is a placeholder, the value nowhere in the output" || { fail "tenant s: the variable inside"; note "$OUT"; }
[ "$(hdrs /tenant-secret)" = "[[\"Authorization\",\"Bearer $TVAL\"]]" ] &&
    ok "tenant s: api.secret.test received the value in place of the placeholder" || { fail "tenant s upstream: $(hdrs /tenant-secret)"; note "$OUT"; }
grep -qE "$REFUSED_403" <<<"$OUT" && ok "tenant s: a host it was not given (plain.test) stays refused" || { fail "tenant s: plain.test"; note "$OUT"; }
check "tenant s: the audit names the secret on the intercepted connection" bash -c \
    "jq -s -e '[.[] | select(.event == \"egress\" and .host == \"api.secret.test\" and .intercepted and (.secrets | index(\"TENANT_TOKEN\")))] | length == 1' \
     '$T/state/sandboxes/$s_id/audit.jsonl' >/dev/null"
create '{"templateID": "base"}'
in_sandbox 'echo "tok=${TENANT_TOKEN:-none}"'
grep -qx 'tok=none' <<<"$OUT" && ok "tenant t's sandbox has no TENANT_TOKEN (another tenant's secret)" || { fail "tenant t sees TENANT_TOKEN"; note "$OUT"; }
check "the tenant's value is in no file of the server's state dir or its log" bash -c "! grep -rqsF -e '$TVAL' '$T/state' '$T/serve.log'"
# A tenants file whose secret reads a relative path: the server does not start, and says where.
sed 's|"file:[^"]*"|"file:relative/token"|' "$T/tenants.json" > "$T/tenants-bad.json"
out=$("$EXG" serve --listen 127.0.0.1:0 --tenants "$T/tenants-bad.json" --state-dir "$T/state-bad" 2>&1); rc=$?
[ "$rc" -ne 0 ] && grep -q 'tenants\[1\]\.secrets.*absolute path' <<<"$out" &&
    ok "tenants file with a relative secret path: refused at start ($(tail -1 <<<"$out"))" || fail "bad tenants file: rc $rc: $out"

kill -TERM "$SERVER_PID"; wait "$SERVER_PID"; st=$?
[ "$st" = 0 ] && [ -z "$(ls -A "$T/state/sandboxes")" ] && ok "SIGTERM: exit 0, nothing left" || fail "SIGTERM: exit $st"
finish
