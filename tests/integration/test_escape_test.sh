#!/usr/bin/env bash
# `exguardian escape-test`: the suite passes on the default policy (nothing escaped, no required
# probe skipped, >= 100 probes, JSON and HTML written), and it catches a hole: against
# deliberately weakened configurations the matching probes report ESCAPED and the exit status
# is non-zero. The suite builds its own network world (no real address is contacted).
source "$(dirname "$0")/lib.sh"

J=$T/escape.json
H=$T/escape.html

# probe_verdict FILE ID: the verdict of one probe in a JSON report.
probe_verdict() {
    python3 -c '
import json, sys
r = json.load(open(sys.argv[1]))
print(next((p["verdict"] for p in r["probes"] if p["id"] == sys.argv[2]), "MISSING"))' "$1" "$2" 2>/dev/null
}
probe_evidence() {
    python3 -c '
import json, sys
r = json.load(open(sys.argv[1]))
print(next((p["evidence"] for p in r["probes"] if p["id"] == sys.argv[2]), "MISSING"))' "$1" "$2" 2>/dev/null
}

# --- The default policy holds.
start=$SECONDS
run "$EXG" escape-test --json "$J" --html "$H"
took=$((SECONDS - start))
if [ "$STATUS" -eq 0 ]; then ok "escape-test on the default policy exits 0 (${took}s)"
else
    fail "escape-test on the default policy exits $STATUS (${took}s)"
    grep -E ' (ESCAPED|FAILED) |skipped' <<<"$OUT" | head -20 | sed 's/^/#      /'
fi
# Its duration is bench/ matter (no timed assertions in tests); it is printed above.
summary=$(grep -E '^[0-9]+ held, [0-9]+ escaped' <<<"$OUT" | head -1)
check "summary line printed: $summary" test -n "$summary"
check "0 escaped in the summary" grep -qE '^[0-9]+ held, 0 escaped' <<<"$summary"
check "JSON report written" test -s "$J"
check "JSON: >= 100 probes, every one held or skipped with a reason, none required skipped" python3 -c "
import json, sys
r = json.load(open('$J'))
p = r['probes']
assert len(p) >= 100, len(p)
bad = [x['id'] + ': ' + x['verdict'] + ' ' + x['evidence'] for x in p
       if x['verdict'] not in ('held', 'skipped') or (x['verdict'] == 'skipped' and (x['required'] or not x['evidence']))]
assert not bad, bad[:5]
assert r['summary']['escaped'] == 0 and r['summary']['passed'] is True
assert r['host']['capabilities'], 'no host capabilities'
for k in ('id', 'category', 'command', 'expectation', 'verdict', 'evidence', 'exit_status', 'output'):
    assert all(k in x for x in p), k
"
check "JSON: the userland probes ran in one sandbox of their own" python3 -c "
import json
p = {x['id']: x for x in json.load(open('$J'))['probes']}
u = ('sandbox-status', 'seed-touch-home', 'seed-read-credentials', 'proc-pid1', 'work-write', 'work-git-commit')
assert all(p[i]['shared_with'] >= 15 and p[i]['shared_with'] == p[u[0]]['shared_with'] for i in u), [(i, p[i]['shared_with']) for i in u]
assert p['fd-leak']['shared_with'] == 0 and p['seed-git-hook']['shared_with'] == 0
"
check "JSON: the network world was built" python3 -c "import json; assert json.load(open('$J'))['world']['up']"
# The kernel probes share one sandbox: each must be credited with its own refusal only (the
# audit line its tagged process caused), never a neighbour's.
check "JSON: the kernel probes ran in one sandbox, each credited with its own syscall's audit line" python3 -c "
import json, re
p = [x for x in json.load(open('$J'))['probes'] if x['id'].startswith('kernel-') and x['exit_status'] != -1]
assert len(p) >= 80 and all(x['shared_with'] == len(p) - 1 for x in p), [(x['id'], x['shared_with']) for x in p][:3]
want = {'kernel-bpf': 'bpf', 'kernel-ptrace-attach': 'ptrace', 'kernel-io-uring-setup': 'io_uring_setup',
        'kernel-unshare-newuser': 'unshare', 'kernel-init-module': 'init_module', 'kernel-reboot': 'reboot'}
got = {x['id']: re.search(r'audit: (\\w+) refused', x['evidence']) for x in p if x['id'] in want}
bad = {i: (m.group(1) if m else None) for i, m in got.items() if not m or m.group(1) != want[i]}
assert len(got) == len(want) and not bad, bad
"
for id in seed-touch-home seed-read-credentials seed-env-secrets seed-curl-example-org seed-curl-metadata \
          seed-docker-socket seed-git-hook kernel-bpf kernel-tiocsti kernel-io-uring-setup kernel-x32-socket \
          net-rebind-loopback net-socks-metadata-ip net-udp net-transparent-sni-mismatch net-transparent-unassigned \
          kernel-socket-vsock persist-nested-repo-hook \
          persist-hookspath proc-host-processes proc-pid1-signals fd-leak stdio-reopen work-git-commit net-allowed-control limit-timeout \
          planted-snapshot-worktree sibling-tmp-read cleanup-processes cleanup-canaries; do
    v=$(probe_verdict "$J" "$id")
    check "probe $id: held ($v)" test "$v" = held
done
# A fabricated snapshot git directory whose core.worktree is HOME: its config quarantined (exit 123,
# a planted line); a sibling's files in the host's /tmp, /var/tmp and /dev/shm: not there at all
# (the process layer's own temp trees), said so.
check "  planted-snapshot-worktree: quarantined by the sweep ($(probe_evidence "$J" planted-snapshot-worktree | cut -c1-90))" \
    bash -c 'grep -q "^exit 123; audit: planted .*/snap-x/config" <<<"$1"' _ "$(probe_evidence "$J" planted-snapshot-worktree)"
check "  sibling-tmp-read: held by construction, the sibling's three paths absent inside" \
    bash -c 'grep -q "^held by construction: .*/tmp/exguardian-.*absent.*/var/tmp/.*absent.*/dev/shm/.*absent" <<<"$1"' _ "$(probe_evidence "$J" sibling-tmp-read)"
check "  ... and escape-test removed the sibling directories it planted (those its evidence names)" \
    bash -c 'set -- $(grep -oE "(/tmp/exguardian-exgsib|/var/tmp/exg-sibling\.|/dev/shm/exg-sibling\.)[0-9a-f]+" <<<"$1"); [ $# = 3 ] && [ ! -e "$1" ] && [ ! -e "$2" ] && [ ! -e "$3" ]' _ "$(probe_evidence "$J" sibling-tmp-read)"
check "HTML report written, with the summary line" grep -qF "$summary" "$H"
check "HTML report is self-contained (no external resources)" bash -c "! grep -qiE '<(script|link)[^>]+(src|href)=\"?https?:' '$H'"

# --- It catches holes.
# expect_escape DESC PROBE_ID ESCAPE-TEST ARGS...: exit non-zero and PROBE_ID reported ESCAPED.
# Each weakened run selects the probes its hole concerns (--only): the whole suite on the default
# policy ran above, and four more whole runs cost CI about three minutes for nothing they check.
expect_escape() {
    local desc=$1 id=$2; shift 2
    local j=$T/weak.json
    rm -f "$j"
    run "$EXG" escape-test --json "$j" "$@"
    local v
    v=$(probe_verdict "$j" "$id")
    if [ "$STATUS" -ne 0 ] && [ "$v" = ESCAPED ]; then ok "$desc: $id ESCAPED, exit $STATUS"
    else fail "$desc: expected $id ESCAPED and a non-zero exit, got $v, exit $STATUS"; show_last; fi
}

# (a) Network wide open by address: the proxy's address checks no longer stop the metadata server.
cat > "$T/open.json" <<'JSON'
{"network": {"allowedDomains": ["allowed.test", "meta.test", "rebind.test", "private.test"], "deniedDomains": [],
             "allowedCidrs": ["0.0.0.0/0", "::/0"]},
 "filesystem": {"denyRead": [], "allowWrite": [], "denyWrite": []}}
JSON
expect_escape "network wide open (allowedCidrs 0.0.0.0/0, ::/0)" seed-curl-metadata --policy "$T/open.json" \
    --only seed-curl-metadata --only net-metadata-name
check "  the metadata name probe escaped too" test "$(probe_verdict "$T/weak.json" net-metadata-name)" = ESCAPED

# (b) HOME writable.
cat > "$T/home.json" <<'JSON'
{"network": {"allowedDomains": [], "deniedDomains": []},
 "filesystem": {"denyRead": [], "allowWrite": ["~"], "denyWrite": []}}
JSON
expect_escape "HOME writable (allowWrite ~)" seed-touch-home --policy "$T/home.json" --only seed-touch-home

# (c) Secrets passed into the environment. The secrets probes share the userland batch's sandbox:
# the escape is the env probe's, and its neighbours there, which read files, still hold.
expect_escape "GITHUB_TOKEN passed in (--env GITHUB_TOKEN)" seed-env-secrets --run-arg=--env --run-arg=GITHUB_TOKEN \
    --only seed-read-credentials --only seed-env-secrets --only secrets-credential-files
check "  its batch neighbours hold (seed-read-credentials, secrets-credential-files), in the same sandbox" python3 -c "
import json
p = {x['id']: x for x in json.load(open('$T/weak.json'))['probes']}
ids = ('seed-read-credentials', 'seed-env-secrets', 'secrets-credential-files')
assert all(p[i]['shared_with'] == 2 for i in ids), [(i, p[i]['shared_with']) for i in ids]
assert p['seed-read-credentials']['verdict'] == 'held' and p['secrets-credential-files']['verdict'] == 'held', p
"
check "  the run arguments are in the report header" python3 -c "
import json; r = json.load(open('$T/weak.json')); assert r['run_args'] == ['--env', 'GITHUB_TOKEN'], r['run_args']"

# (d) seccomp turned off, explicitly (the flag is part of the CLI: its absence is a failure).
if "$EXG" run --help 2>&1 | grep -q -- --unsafe-no-seccomp; then
    # (bpf, mount and the like are still refused by the kernel itself: no capabilities inside.)
    expect_escape "seccomp off (--unsafe-no-seccomp)" kernel-ptrace-attach --run-arg=--unsafe-no-seccomp --html "$T/weak.html" \
        --only kernel-ptrace-attach --only kernel-process-vm-readv --only sandbox-status
    check "  process_vm_readv escaped too" test "$(probe_verdict "$T/weak.json" kernel-process-vm-readv)" = ESCAPED
    check "  /proc/self/status shows no filter (sandbox-status ESCAPED)" test "$(probe_verdict "$T/weak.json" sandbox-status)" = ESCAPED
    check "  the terminal report flags the weakened sandbox" grep -q 'SANDBOX DELIBERATELY WEAKENED: --unsafe-no-seccomp' <<<"$OUT"
    check "  the HTML report flags the weakened sandbox" grep -q 'SANDBOX DELIBERATELY WEAKENED: --unsafe-no-seccomp' "$T/weak.html"
    check "  the JSON report flags the weakened sandbox" python3 -c "
import json; r = json.load(open('$T/weak.json')); assert any('--unsafe-no-seccomp' in w for w in r['warnings'])"
else
    fail "seccomp off: exguardian run has no --unsafe-no-seccomp option (the weakened-sandbox check cannot run)"
fi

# A policy exguardian refuses: the suite says so once and exits non-zero, nothing reported held.
echo '{"network": {"allowedDomains": ["*"]}}' > "$T/bad.json"
run "$EXG" escape-test --policy "$T/bad.json" --json "$T/bad-report.json"
check "an invalid policy: non-zero exit ($STATUS)" test "$STATUS" -ne 0
check "  reported as the sandbox not set up" grep -q 'could not set up the sandbox' "$T/bad-report.json"

finish
