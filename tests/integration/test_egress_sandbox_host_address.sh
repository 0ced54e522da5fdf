#!/usr/bin/env bash
# An address the host gains during a run (issue 39.3: DHCP, a VPN, a bridge coming up) is
# refused from the moment it appears, through a name the policy allows that resolves to it.
# In the egress test world (egress_world.sh), gained.test is 198.51.100.77, an address of the
# servers' side at first; while one sandbox runs, this test's namespace (the supervisor's, where
# the proxy connects from) gains 198.51.100.77 on lo, with a listener there: the same sandbox's
# next requests are refused (403, the audit line says why) and the listener sees nothing; once
# the address is gone again the name reaches the servers' side again, as before.
source "$(dirname "$0")/lib.sh"

new_workspace
require_sandbox || finish
if [ "$(id -u)" != 0 ]; then
    # Adding an address to the supervisor's own namespace needs CAP_NET_ADMIN there.
    skip "the host's addresses change only as root (the root run covers it)"
    finish
fi

audit="$T/audit.jsonl"
cat > "$T/policy.json" <<'JSON'
{
  "network": {"allowedDomains": ["gained.test"]},
  "filesystem": {"denyRead": [], "allowWrite": [], "denyWrite": []}
}
JSON

# Before anything: gained.test is the servers' side.
expect_output_contains "hello from 198.51.100.77" sbx --policy "$T/policy.json" -- curl -sS -m 10 http://gained.test/

# One sandbox for the whole story: step N waits for $WS/goN, then asks (plain HTTP and CONNECT).
steps='for n in 1 2 3; do
  while [ ! -e go$n ]; do sleep 0.1; done
  curl -sS -m 10 -i http://gained.test/ > out$n.plain 2>&1
  curl -sS -m 10 -i -p http://gained.test/ > out$n.connect 2>&1
  touch done$n
done'
(cd "$WS" && exec timeout -k 5 180 "${EXG_RUN[@]}" --policy "$T/policy.json" --audit-log "$audit" -- bash -c "$steps") \
    >"$T/run.out" 2>&1 &
run_pid=$!
track_bg "$run_pid"
step() {  # N: let the sandbox's step N run, wait for it
    touch "$WS/go$1"
    wait_for 60 test -e "$WS/done$1" || { fail "step $1 of the sandbox did not finish: $(head -c 400 "$T/run.out")"; return 1; }
}

step 1
check "step 1 (address elsewhere): plain HTTP reaches the servers' side" grep -q "hello from 198.51.100.77" "$WS/out1.plain"
check "step 1: CONNECT too" grep -q "hello from 198.51.100.77" "$WS/out1.connect"

# The host (this namespace) gains the address while the sandbox runs, with a listener on it.
ip addr add 198.51.100.77/32 dev lo || fail "ip addr add 198.51.100.77/32 dev lo"
python3 -c '
import socket, sys
l = socket.create_server(("198.51.100.77", 80))
print("up", flush=True)
while True:
    c, _ = l.accept()
    with open(sys.argv[1], "a") as f: f.write("accepted\n")
    c.sendall(b"HTTP/1.1 200 OK\r\nContent-Length: 22\r\nConnection: close\r\n\r\nhello from this host\r\n")
    c.close()' "$T/local.log" >"$T/local.out" 2>&1 &
local_pid=$!
track_bg "$local_pid"
wait_for 20 grep -q up "$T/local.out" || fail "the listener on 198.51.100.77 did not come up"
check "from this namespace, 198.51.100.77 is now this host" \
    bash -c "curl -sS -m 5 --noproxy '*' http://198.51.100.77/ | grep -q 'hello from this host' && : > '$T/local.log'"

step 2
check "step 2 (the host's own now): plain HTTP refused with 403" grep -q "^HTTP/1.1 403" "$WS/out2.plain"
check "step 2: the refusal names the reason" grep -qi "^X-ExGuardian-Refused: .*an address of this host" "$WS/out2.plain"
check "step 2: CONNECT refused with 403" grep -q "^HTTP/1.1 403" "$WS/out2.connect"
check "step 2: nothing from this host came back" bash -c "! grep -q 'hello from this host' '$WS'/out2.*"
check "step 2: the listener on the gained address saw no connection" test ! -s "$T/local.log"

# The address goes away: the name reaches the servers' side again.
kill "$local_pid" 2>/dev/null
ip addr del 198.51.100.77/32 dev lo || fail "ip addr del 198.51.100.77/32 dev lo"
step 3
check "step 3 (address gone again): plain HTTP reaches the servers' side" grep -q "hello from 198.51.100.77" "$WS/out3.plain"
check "step 3: CONNECT too" grep -q "hello from 198.51.100.77" "$WS/out3.connect"
wait "$run_pid"
rc=$?
check "the run ended normally (status $rc)" test "$rc" = 0

check "the audit log has the refusals, naming the reason" audit_has "$audit" \
    '{"host": "gained.test", "decision": "refused", "rule": "198.51.100.77 is an address of this host", "reason": "resolved address is an address of this host"}' \
    '{"host": "gained.test", "protocol": "connect", "decision": "refused", "rule": "198.51.100.77 is an address of this host"}'
check "the audit log has the allowed requests before and after" audit_has "$audit" \
    '{"host": "gained.test", "decision": "allowed", "address": "198.51.100.77"}'
check "the servers' side got steps 1 and 3 (plain and CONNECT each)" \
    test "$(grep -c '^198\.51\.100\.77 GET / host=gained.test' "$EGW_LOG")" -ge 5

finish
