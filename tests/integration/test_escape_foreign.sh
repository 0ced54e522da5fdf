#!/usr/bin/env bash
# `exguardian escape-test --sandbox`: the same probes in the same world, inside sandboxes that are
# not ExGuardian's (issue 47), judged from the host side.
# - the presets are documented argument lists (--dry-run shows them); bad input is one line, 125;
# - bubblewrap with a shared network (bwrap-net): the probes are judged, the kernel probes ran
#   the static exguardian-probe inside, what needs ExGuardian's own machinery says "not
#   applicable: WHY" (never held), and the known differences show: the world's metadata server
#   is reached (ESCAPED), the inherited fd on a canary is readable, the canary env is inside;
#   ExGuardian's process layer holds the very same probes;
# - bubblewrap without a network (bwrap): the metadata probes hold, the allowed host is not
#   reachable either (not applicable, said so);
# - no sandbox (none): the probes that are safe without one see every escape (the canary changed,
#   the world's metadata and private hosts reached, the host's marker process killed); the
#   destructive ones are not run, and say so;
# - bubblewrap's presets take Codex's arguments: the workspace's .git is read-only again;
# - no sandbox: the UDP datagram reaches the world's server and is judged ESCAPED (the judge can
#   tell; the late-logged case is unit EscapeWorldMark);
# - --compare: one report with a column per sandbox (srt from npm at a pinned version, and, as
#   root, podman with the seed's hardened flags and gVisor under podman), its cells checked against
#   the facts above, the exit status ExGuardian's own column's;
# - podman (root, where it runs here) on a busybox image made by the test, never pulled.
# Egress only inside the world escape-test builds (its own network namespaces).
source "$(dirname "$0")/lib.sh"

J=$T/foreign.json

# verdicts FILE ID...: "ID=VERDICT" per probe, space-separated.
verdicts() {
    python3 -c '
import json, sys
p = {x["id"]: x for x in json.load(open(sys.argv[1]))["probes"]}
print(" ".join(i + "=" + (p[i]["verdict"] if i in p else "MISSING") for i in sys.argv[2:]))' "$@" 2>/dev/null
}
verdict() { verdicts "$1" "$2" | cut -d= -f2; }

PROBE_BIN=$(dirname "$EXG")/exguardian-probe
check "exguardian-probe is built beside exguardian, static" bash -c "[ -x '$PROBE_BIN' ] && ! ldd '$PROBE_BIN' >/dev/null 2>&1"
run "$PROBE_BIN" fork-allowed
check "exguardian-probe runs a probe on its own (fork-allowed: $OUT)" test "$STATUS" = 0

if ! command -v bwrap >/dev/null; then
    # (make deps installs it: Debian's bubblewrap)
    fail "bubblewrap is not installed: the bwrap presets cannot be tested"
    finish
fi

# ---- presets: documented argument lists --------------------------------------------------------
run "$EXG" escape-test --sandbox bwrap --dry-run
check "--dry-run --sandbox bwrap: exit 0, the arguments shown" bash -c '[ "$1" = 0 ] &&
    grep -qF -- "bwrap --ro-bind / / --dev /dev --proc /proc --tmpfs /tmp --ro-bind {home} {home} --ro-bind {probe} {probe} --bind {workspace} {workspace} --ro-bind-try {workspace}/.git {workspace}/.git --unshare-all --die-with-parent --new-session --chdir {workspace} -- sh -c COMMAND" <<<"$2"' _ "$STATUS" "$OUT"
check "  the probe program named ({probe}: $PROBE_BIN)" grep -qF "{probe}: $PROBE_BIN" <<<"$OUT"
run "$EXG" escape-test --sandbox bwrap-net --dry-run
check "--dry-run --sandbox bwrap-net: --unshare-all --share-net" grep -qF -- "--unshare-all --share-net --die-with-parent" <<<"$OUT"
run "$EXG" escape-test --sandbox 'bwrap --ro-bind / / --chdir "{workspace}" --' --dry-run
check "--dry-run with a prefix: split as sh would, placeholders kept ($(head -2 <<<"$OUT" | tail -1))" \
    grep -qF 'every probe runs as: bwrap --ro-bind / / --chdir {workspace} -- sh -c COMMAND' <<<"$OUT"

# ---- bad input ---------------------------------------------------------------------------------
run "$EXG" escape-test --sandbox exg-no-such-sandbox-tool
check "--sandbox naming nothing: exit 125, one line naming it ($ERR)" bash -c \
    '[ "$1" = 125 ] && grep -q "exg-no-such-sandbox-tool is neither a preset" <<<"$2" && [ "$(wc -l <<<"$2")" = 1 ]' _ "$STATUS" "$ERR"
run "$EXG" escape-test --sandbox podman
check "--sandbox podman without an image: exit 125 ($ERR)" bash -c '[ "$1" = 125 ] && grep -q -- "--sandbox-image" <<<"$2"' _ "$STATUS" "$ERR"
run "$EXG" escape-test --sandbox "bwrap 'unterminated"
check "--sandbox with an unterminated quote: exit 125 ($ERR)" bash -c '[ "$1" = 125 ] && grep -q "unterminated" <<<"$2"' _ "$STATUS" "$ERR"
run "$EXG" escape-test --sandbox bwrap --run-arg=--unsafe-no-seccomp
check "--sandbox with --run-arg (exguardian run's): exit 125" test "$STATUS" = 125

# ---- bubblewrap sharing the caller's network (the test world) ------------------------------------
NET_IDS=(net-direct-metadata seed-curl-metadata net-metadata-name net-metadata-hex)
run "$EXG" escape-test --sandbox bwrap-net --json "$J"
check "escape-test --sandbox bwrap-net: exit 1 (something escaped), JSON written" bash -c '[ "$1" = 1 ] && [ -s "$2" ]' _ "$STATUS" "$J"
[ "$STATUS" = 1 ] || show_last
check "  the report's header names the foreign sandbox and its arguments" \
    grep -qF 'FOREIGN SANDBOX bwrap-net: every probe ran as: bwrap --ro-bind / /' <<<"$OUT"
check "  the world was built; the sandbox was seen in place (own namespaces, the net shared)" python3 -c "
import json
r = json.load(open('$J'))
p = {x['id']: x for x in r['probes']}
assert r['world']['up'], r['world']
s = p['sandbox-in-place']
assert s['verdict'] == 'held' and 'namespaces of its own: mnt pid' in s['evidence'] and 'shared with the caller: net' in s['evidence'], s
assert all(x['layer'] == 'bwrap-net' for x in r['probes']), set(x['layer'] for x in r['probes'])
"
check "  the kernel probes ran exguardian-probe inside, each judged (held or escaped), in one sandbox" python3 -c "
import json
p = [x for x in json.load(open('$J'))['probes'] if x['id'].startswith('kernel-')]
assert len(p) >= 80, len(p)
bad = [(x['id'], x['verdict'], x['evidence']) for x in p if x['verdict'] not in ('held', 'ESCAPED') or x['exit_status'] not in (0, 1)]
assert not bad, bad[:5]
assert all(x['command'].startswith('$PROBE_BIN ') for x in p), p[0]['command']
assert all(x['shared_with'] == len(p) - 1 for x in p)
# bubblewrap has no seccomp filter of its own: ptrace of its own child is the kernel's to allow.
k = {x['id']: x for x in p}
assert k['kernel-ptrace-attach']['verdict'] == 'ESCAPED', k['kernel-ptrace-attach']
assert k['kernel-fork-allowed']['verdict'] == 'held', k['kernel-fork-allowed']
"
check "  not applicable: skipped, not required, saying why, and never held" python3 -c "
import json
p = {x['id']: x for x in json.load(open('$J'))['probes']}
na = {i: x for i, x in p.items() if x['evidence'].startswith('not applicable: ')}
must = ['net-socks-metadata-ip', 'net-transparent-sni-mismatch', 'persist-exguardian-binary', 'limit-pids',
        'limit-memory', 'move-parent-of-denyread', 'planted-allow-write-tree', 'cleanup-cgroups', 'seed-curl-example-org']
missing = [i for i in must if i not in na]
assert not missing, missing
bad = [(i, x['verdict'], x['required']) for i, x in na.items() if x['verdict'] != 'skipped' or x['required']]
assert not bad, bad
short = [i for i, x in na.items() if len(x['evidence']) < len('not applicable: ') + 20]
assert not short, short
# Every other probe was judged: none skipped without being not applicable.
other = [(i, x['evidence']) for i, x in p.items() if x['verdict'] == 'skipped' and i not in na]
assert not other, other
"
check "  known differences: the world's metadata server reached, the UDP datagram logged ($(verdicts "$J" "${NET_IDS[@]}" net-udp))" python3 -c "
import json
p = {x['id']: x for x in json.load(open('$J'))['probes']}
for i in '${NET_IDS[*]}'.split():
    assert p[i]['verdict'] == 'ESCAPED' and \"the world's server received: 169.254.169.254\" in p[i]['evidence'], p[i]
assert p['net-allowed-control']['verdict'] == 'held', p['net-allowed-control']
# The datagram is judged once the world's server has logged it (the judge's own mark comes after it).
assert p['net-udp']['verdict'] == 'ESCAPED' and '203.0.113.10 UDP 4 bytes' in p['net-udp']['evidence'], p['net-udp']
assert not [i for i, x in p.items() if 'UDP mark' in x['evidence']], 'a mark line in the evidence'
"
check "  known differences: the canary env, the inherited canary fd, the credentials readable ($(verdicts "$J" seed-env-secrets fd-leak seed-read-credentials))" \
    test "$(verdicts "$J" seed-env-secrets fd-leak seed-read-credentials)" = "seed-env-secrets=ESCAPED fd-leak=ESCAPED seed-read-credentials=ESCAPED"
check "  a sibling sandbox's file in /var/tmp read (the host's, under --ro-bind / /: $(verdicts "$J" sibling-tmp-read)); a fabricated snapshot's core.worktree = HOME left for a later git ($(verdicts "$J" planted-snapshot-worktree))" python3 -c "
import json
p = {x['id']: x for x in json.load(open('$J'))['probes']}
s, w = p['sibling-tmp-read'], p['planted-snapshot-worktree']
assert s['verdict'] == 'ESCAPED' and \"a sibling's secret read in /var/tmp/exg-sibling.\" in s['evidence'], s
assert w['verdict'] == 'ESCAPED' and 'core.worktree is HOME' in w['evidence'], w
"
check "  held where bubblewrap holds ($(verdicts "$J" seed-touch-home proc-host-processes proc-pid1 proc-host-kill work-write work-tmp))" \
    test "$(verdicts "$J" seed-touch-home proc-host-processes proc-pid1 proc-host-kill work-write work-tmp)" = \
    "seed-touch-home=held proc-host-processes=held proc-pid1=held proc-host-kill=held work-write=held work-tmp=held"
check "  the workspace's .git is read-only again, as Codex binds it (seed-git-hook, persist-hookspath: $(verdicts "$J" seed-git-hook persist-hookspath)); a nested repository's is not" python3 -c "
import json
p = {x['id']: x for x in json.load(open('$J'))['probes']}
for i in ('seed-git-hook', 'persist-hookspath'):
    assert p[i]['verdict'] == 'held', p[i]
assert p['planted-symlinked-hook-target']['verdict'] == 'ESCAPED', p['planted-symlinked-hook-target']
"
check "  shell probes share one sandbox, each still judged by its own host file ($(verdicts "$J" persist-envrc planted-lefthook persist-fsmonitor-target planted-symlinked-hook-target work-write))" python3 -c "
import json
ps = json.load(open('$J'))['probes']
p = {x['id']: x for x in ps}
ids = ('persist-envrc', 'planted-lefthook', 'persist-fsmonitor-target', 'planted-symlinked-hook-target', 'work-write', 'proc-pid1')
shared = {p[i]['shared_with'] for i in ids}
assert len(shared) == 1 and shared.pop() >= 30, [(i, p[i]['shared_with']) for i in ids]
# A batch's members are judged one after the other (each judge sees its own change, not its neighbours').
at = [x['id'] for x in ps].index
assert max(at(i) for i in ids) - min(at(i) for i in ids) <= p['work-write']['shared_with'], [at(i) for i in ids]
for i, f in (('persist-envrc', '.envrc created'), ('persist-fsmonitor-target', 'fsmon.sh changed'),
             ('planted-symlinked-hook-target', 'pre-push changed')):
    assert p[i]['verdict'] == 'ESCAPED' and f in p[i]['evidence'], p[i]
assert p['planted-lefthook']['verdict'] == 'ESCAPED', p['planted-lefthook']
# What writes a file every judge compares keeps a sandbox of its own; so do the network probes.
assert all(p[i]['shared_with'] == 0 for i in ('seed-git-hook', 'persist-home-bashrc', 'persist-hookspath', 'net-udp'))
"

# The same probes under ExGuardian's process layer: held.
run "$EXG" escape-test --json "$T/exg.json" $(printf -- '--only %s ' "${NET_IDS[@]}" seed-env-secrets fd-leak seed-read-credentials)
check "ExGuardian's process layer holds the same probes ($(verdicts "$T/exg.json" "${NET_IDS[@]}" seed-env-secrets fd-leak))" \
    python3 -c "
import json
p = {x['id']: x for x in json.load(open('$T/exg.json'))['probes']}
ids = '${NET_IDS[*]} seed-env-secrets fd-leak seed-read-credentials'.split()
assert all(p[i]['verdict'] == 'held' for i in ids), [(i, p[i]['verdict'], p[i]['evidence']) for i in ids]
"

# ---- bubblewrap without a network ------------------------------------------------------------------
run "$EXG" escape-test --sandbox bwrap --json "$J" $(printf -- '--only %s ' "${NET_IDS[@]}" net-allowed-control seed-env-secrets kernel-bpf)
check "--sandbox bwrap (no network): the metadata probes hold ($(verdicts "$J" "${NET_IDS[@]}"))" python3 -c "
import json
p = {x['id']: x for x in json.load(open('$J'))['probes']}
assert all(p[i]['verdict'] == 'held' and 'nothing arrived' in p[i]['evidence'] for i in '${NET_IDS[*]}'.split()), p
assert p['sandbox-in-place']['verdict'] == 'held' and 'net' in p['sandbox-in-place']['evidence'].split(';')[1], p['sandbox-in-place']
c = p['net-allowed-control']
assert c['verdict'] == 'skipped' and c['evidence'].startswith('not applicable: the allowed host is not reachable'), c
assert p['seed-env-secrets']['verdict'] == 'ESCAPED', p['seed-env-secrets']
"

# ---- a prefix that is no sandbox: nothing destructive runs -------------------------------------------
run "$EXG" escape-test --sandbox env --json "$J" --only setid-file-left --only seed-read-credentials
check "--sandbox env (no namespaces of its own): not in place, the rest not run ($(verdicts "$J" sandbox-in-place setid-file-left))" python3 -c "
import json
p = {x['id']: x for x in json.load(open('$J'))['probes']}
assert p['sandbox-in-place']['verdict'] == 'FAILED' and \"caller's own namespaces\" in p['sandbox-in-place']['evidence'], p['sandbox-in-place']
assert p['setid-file-left']['exit_status'] == -1 and p['setid-file-left']['verdict'] == 'skipped', p['setid-file-left']
"

# ---- no sandbox at all (none): the probes can tell an escape ----------------------------------------
# Only the probes the catalogue calls safe without a sandbox run, on the host as this user, in the
# world escape-test builds (its network namespaces, a private mount namespace): every escape must
# touch only what the test made (the fake HOME's canaries, the workspace, its marker process, the
# world's servers); the rest are "not run: unsafe without a sandbox", never held.
rm -f /tmp/exg-planted-ran
[ -e /tmp/f ] && note "/tmp/f exists before the run"
ls -d /tmp/exg-probe-* 2>/dev/null | sort > "$T/probe-dirs.before"
run "$EXG" escape-test --sandbox none --json "$J"
check "--sandbox none: exit 1 (escapes), the header says there is no sandbox" bash -c \
    '[ "$1" = 1 ] && grep -qF "NO SANDBOX (--sandbox none)" <<<"$2"' _ "$STATUS" "$OUT"
[ -s "$J" ] || show_last
NONE_IDS=(cleanup-canaries seed-read-credentials seed-touch-home seed-git-hook persist-home-bashrc seed-env-secrets fd-leak
    net-direct-metadata seed-curl-metadata net-metadata-name net-private-literal net-rebind-loopback net-udp proc-host-kill proc-pid1
    host-unix-socket setid-file-left cleanup-processes sibling-tmp-read planted-snapshot-worktree)
check "  under none the probes see every escape ($(verdicts "$J" "${NONE_IDS[@]}" | tr ' ' '\n' | grep -vc '=ESCAPED$') not ESCAPED)" python3 -c "
import json
p = {x['id']: x for x in json.load(open('$J'))['probes']}
bad = [(i, p[i]['verdict'], p[i]['evidence']) for i in '${NONE_IDS[*]}'.split() if p[i]['verdict'] != 'ESCAPED']
assert not bad, bad
assert 'home/.bashrc changed on the host' in p['cleanup-canaries']['evidence'], p['cleanup-canaries']
for i in ('net-direct-metadata', 'seed-curl-metadata'):
    assert \"the world's server received: 169.254.169.254\" in p[i]['evidence'], p[i]
assert \"the world's server received: 10.0.0.5\" in p['net-private-literal']['evidence'], p['net-private-literal']
# The UDP judge can say ESCAPED: with no sandbox the datagram reaches the world's server (held
# elsewhere is then the sandbox's doing; the late-logged case: unit EscapeWorldMark).
assert \"the world's server received: 203.0.113.10 UDP 4 bytes\" in p['net-udp']['evidence'], p['net-udp']
assert 'marker process is gone' in p['proc-host-kill']['evidence'], p['proc-host-kill']
assert p['cleanup-host-marker']['verdict'] == 'ESCAPED', p['cleanup-host-marker']
"
check "  the destructive probes were not run, and say so (never held)" python3 -c "
import json
p = {x['id']: x for x in json.load(open('$J'))['probes']}
for i in ('kernel-reboot', 'kernel-kexec-load', 'kernel-init-module', 'kernel-finit-module', 'kernel-swapon', 'kernel-acct',
          'kernel-settimeofday', 'limit-pids', 'limit-memory', 'proc-pid1-signals', 'proc-environ-every'):
    x = p[i]
    assert x['verdict'] == 'skipped' and x['exit_status'] == -1 and not x['required'], x
    assert x['evidence'].startswith('not run: unsafe without a sandbox: '), x
assert not [i for i, x in p.items() if x['verdict'] == 'held' and 'not run' in x['evidence']]
assert p['sandbox-in-place']['evidence'].startswith('not applicable: no sandbox'), p['sandbox-in-place']
"
check "  nearly every probe that ran escaped; what held is ordinary work or the host kernel's own answer" python3 -c "
import json
ps = json.load(open('$J'))['probes']
ran = [x for x in ps if x['verdict'] != 'skipped' and x['category'] != 'ordinary work' and x['category'] != 'cleanup']
held = [x for x in ran if x['verdict'] == 'held']
# (no docker socket and no terminal here; an ordinary user lacks CAP_SETFCAP: the kernel's own check)
odd = [(x['id'], x['evidence']) for x in held if not x['id'].startswith('kernel-') and x['id'] not in
       ('seed-docker-socket', 'term-no-ctty', 'persist-background-process') + (('setid-file-capability',) if '$EXG_AS' == 'user' else ())]
assert not odd, odd
assert not [x for x in ps if x['verdict'] == 'FAILED'], [(x['id'], x['evidence']) for x in ps if x['verdict'] == 'FAILED']
esc = len(ran) - len(held)
assert esc >= 0.6 * len(ran), (esc, len(ran))
k = {x['id']: x for x in ps}
assert k['kernel-unshare-newns']['verdict'] == 'ESCAPED' or '$EXG_AS' != 'root', k['kernel-unshare-newns']
assert k['kernel-ptrace-attach']['verdict'] == 'ESCAPED', k['kernel-ptrace-attach']
print(esc, 'of', len(ran), 'escaped')
"
ls -d /tmp/exg-probe-* 2>/dev/null | sort > "$T/probe-dirs.after"
check "  nothing outside what the test made: no /run/exguardian/exguardian, no scratch dir of a probe left in /tmp, no /tmp/f (work-tmp wrote in its TMPDIR)" bash -c \
    '[ ! -e /run/exguardian/exguardian ] && [ -z "$(comm -13 "$1" "$2")" ] && [ ! -e /tmp/exg-planted-ran ] && [ ! -e /tmp/f ]' _ "$T/probe-dirs.before" "$T/probe-dirs.after"

# ---- podman's image, made here (never pulled): for --compare's podman columns and the runs after it --
# As root only (no rootless podman is set up for the test user; the root run covers the presets).
PODMAN_WHY=
BB=$(command -v busybox || true)
if [ "$EXG_AS" != root ]; then
    PODMAN_WHY="podman: run as root only here (no rootless podman is set up for the test user; the root run covers the presets)"
elif ! command -v podman >/dev/null; then
    PODMAN_WHY="podman is not installed"
elif [ -z "$BB" ] || ldd "$BB" >/dev/null 2>&1; then
    PODMAN_WHY="podman: no static busybox to make the image from (busybox-static)"
else
    # Its own storage and engine settings (this host needs runc, cgroupfs, a file events log and
    # the rlimits of LAYERS-REPRO.md); the preset's arguments stay the user's.
    mkdir -p "$T/pm/rootfs/bin" "$T/pm/rootfs/tmp" "$T/pm/rootfs/usr/local/bin"
    cp "$BB" "$T/pm/rootfs/bin/busybox"
    for a in $("$BB" --list); do [ "$a" = busybox ] || ln -sf busybox "$T/pm/rootfs/bin/$a"; done
    chmod 1777 "$T/pm/rootfs/tmp"
    printf '[storage]\ndriver = "overlay"\ngraphroot = "%s"\nrunroot = "%s"\n' "$T/pm/storage" "$T/pm/run" > "$T/pm/storage.conf"
    printf '[containers]\ndefault_ulimits = ["nofile=1024:1024", "nproc=4096:4096"]\n[engine]\nruntime = "runc"\ncgroup_manager = "cgroupfs"\nevents_logger = "file"\nevents_logfile_path = "%s"\n' \
        "$T/pm/events.log" > "$T/pm/containers.conf"
    export CONTAINERS_STORAGE_CONF=$T/pm/storage.conf CONTAINERS_CONF=$T/pm/containers.conf
    tar -C "$T/pm/rootfs" -cf "$T/pm/rootfs.tar" . && run podman import "$T/pm/rootfs.tar" localhost/exg-escape-bb
    run podman run --rm --pull=never --network none localhost/exg-escape-bb true
    [ "$STATUS" = 0 ] || PODMAN_WHY="podman does not run containers here: $(head -1 <<<"$ERR")"
fi

# ---- side by side: --compare ----------------------------------------------------------------------
# One run, one JSON and one HTML report, a column per sandbox; the peers' escapes are findings, not
# the tool's failure: the exit status follows ExGuardian's own column. (A subset of probes here: the
# full sets are run above.) srt: Anthropic's sandbox-runtime from npm at a pinned version (cached
# between runs, lib.sh's npm_pinned), with the preset's settings file (the README's shape, the world's
# allowed host allowed): its proxy is the way out, so the network cells say what its allow list did.
SRT_VERSION=0.0.83
CMP_IDS=(seed-read-credentials seed-env-secrets net-direct-metadata persist-home-bashrc kernel-bpf kernel-ptrace-attach proc-pid1-signals)
SRT_IDS=(net-allowed-control seed-curl-metadata seed-git-hook host-unix-socket kernel-chmod-plain-allowed kernel-chmod-setuid)
CMP=exguardian,bwrap-net,none
if ! command -v socat >/dev/null || ! command -v rg >/dev/null; then
    fail "srt needs socat and ripgrep (make deps installs them): srt is left out of --compare"
elif ! npm_pinned "$T/srt" "@anthropic-ai/sandbox-runtime@$SRT_VERSION"; then
    fail "npm install @anthropic-ai/sandbox-runtime@$SRT_VERSION: srt is left out of --compare"; sed 's/^/#   /' "$T/srt/npm.log" | tail -5
else
    SRT_DIR=$T/srt
    PATH=$SRT_DIR/node_modules/.bin:$PATH
    CMP=exguardian,bwrap-net,srt,none
    CMP_IDS+=("${SRT_IDS[@]}")
    run "$EXG" escape-test --sandbox srt --dry-run
    check "--dry-run --sandbox srt: srt --settings, the preset's settings file shown" bash -c '[ "$1" = 0 ] &&
        grep -qF "every probe runs as: srt --settings {settings} -- sh -c COMMAND" <<<"$2" && grep -qF "\"allowedDomains\": [\"allowed.test\"]" <<<"$2"' _ "$STATUS" "$OUT"
    run "$EXG" escape-test --sandbox srt --sandbox-settings "$T/no-such-settings.json"
    check "--sandbox-settings naming no file: exit 125 ($ERR)" bash -c '[ "$1" = 125 ] && grep -q "no-such-settings.json" <<<"$2"' _ "$STATUS" "$ERR"
    run "$EXG" escape-test --sandbox bwrap --sandbox-settings /etc/hostname
    check "--sandbox-settings with a sandbox that reads none: exit 125" test "$STATUS" = 125
fi
# podman with the seed's hardened flags, and gVisor under podman (runsc), on the image made above.
CMP_IMAGE=()
if [ -z "$PODMAN_WHY" ]; then
    CMP=$CMP,podman-hardened
    command -v runsc >/dev/null && CMP=$CMP,podman-runsc || skip "podman-runsc: runsc is not installed"
    CMP_IMAGE=(--sandbox-image localhost/exg-escape-bb)
    CMP_IDS+=(sandbox-status fd-leak work-write proc-pid1)
else
    skip "--compare without the podman columns: $PODMAN_WHY"
fi
run "$EXG" escape-test --compare "$CMP" "${CMP_IMAGE[@]}" --json "$J" --html "$T/cmp.html" $(printf -- '--only %s ' "${CMP_IDS[@]}")
check "--compare $CMP: exit 0 (ExGuardian held; the peers' escapes are findings), JSON and HTML written" \
    bash -c '[ "$1" = 0 ] && [ -s "$2" ] && [ -s "$3" ] && grep -q "RESULT: ExGuardian held" <<<"$4"' _ "$STATUS" "$J" "$T/cmp.html" "$OUT"
[ "$STATUS" = 0 ] || show_last
if [[ $CMP == *srt* ]]; then
    check "  srt's cells against its documented design ($(python3 -c "
import json
rows = {r['id']: r['cells'] for r in json.load(open('$J'))['compare']['rows']}
print(' '.join(i + '=' + rows[i]['srt']['state'] for i in sorted(rows)))"))" python3 -c "
import json
c = json.load(open('$J'))['compare']
col = [x for x in c['columns'] if x['name'] == 'srt'][0]
assert col['version'] == 'srt $SRT_VERSION', col
rows = {r['id']: r['cells'] for r in c['rows']}
s = lambda i: rows[i]['srt']
# bubblewrap without the caller's network namespace; srt's proxy is the only way out.
assert s('sandbox-in-place')['state'] == 'held' and 'net' in s('sandbox-in-place')['evidence'].split(';')[1], s('sandbox-in-place')
# the allow list: the allowed host reached through srt's proxy (the world's server logged it), the metadata
# host refused by it, a direct connection to the metadata address has no network at all.
assert s('net-allowed-control')['state'] == 'held' and 'the server logged it' in s('net-allowed-control')['evidence'], s('net-allowed-control')
for i in ('seed-curl-metadata', 'net-direct-metadata'):
    assert s(i)['state'] == 'held' and 'nothing arrived' in s(i)['evidence'], s(i)
# writes only to the working directory, .git/hooks always denied, AF_UNIX sockets refused by its seccomp helper.
for i in ('persist-home-bashrc', 'seed-git-hook', 'host-unix-socket', 'kernel-bpf'):
    assert s(i)['state'] == 'held', (i, s(i))
# The kernel probes' scratch directory is in the workspace (srt's settings keep /tmp read-only): a plain chmod
# there is ordinary work that works, and a set-uid mode is the kernel's to allow (no seccomp rule of srt's for it).
assert s('kernel-chmod-plain-allowed')['state'] == 'held', s('kernel-chmod-plain-allowed')
assert s('kernel-chmod-setuid')['state'] == 'ESCAPED' and 'allowed' in s('kernel-chmod-setuid')['evidence'], s('kernel-chmod-setuid')
# reads are allowed by default (denyRead: ~/.ssh only), the environment is passed.
assert s('seed-read-credentials')['state'] == 'ESCAPED' and s('seed-env-secrets')['state'] == 'ESCAPED', (s('seed-read-credentials'), s('seed-env-secrets'))
"
fi
if [[ $CMP == *podman* ]]; then
    check "  podman's columns against known facts (hardened: no capability, no new privileges; gVisor: in place)" python3 -c "
import json
c = json.load(open('$J'))['compare']
cols = {x['name']: x for x in c['columns']}
rows = {r['id']: r['cells'] for r in c['rows']}
for n in [x for x in ('podman-hardened', 'podman-runsc') if x in cols]:
    assert cols[n]['version'].startswith('podman version '), cols[n]
    # podman passes neither the caller's environment nor its open fds, nor the fake HOME.
    for i in ('sandbox-in-place', 'seed-env-secrets', 'fd-leak', 'seed-read-credentials', 'work-write', 'proc-pid1'):
        assert rows[i][n]['state'] == 'held', (n, i, rows[i][n])
    # busybox has no curl: the proxy-only and curl probes are not applicable there, never held.
    assert rows['seed-curl-metadata'][n]['state'] == 'not applicable', (n, rows['seed-curl-metadata'][n])
h = rows['sandbox-status']['podman-hardened']
assert h['state'] == 'held' and 'CapEff: 0000000000000000' in h['evidence'] and 'NoNewPrivs: 1' in h['evidence'], h
if 'podman-runsc' in cols:
    assert 'runsc version' in cols['podman-runsc']['version'], cols['podman-runsc']
    # gVisor's kernel answers bpf itself: refused inside, never the host's.
    assert rows['kernel-bpf']['podman-runsc']['state'] == 'held', rows['kernel-bpf']['podman-runsc']
"
fi
check "  a column per sandbox with its version and command, a summary per sandbox and per category" python3 -c "
import json
c = json.load(open('$J'))['compare']
cols = {x['name']: x for x in c['columns']}
assert list(cols) == '$CMP'.split(','), list(cols)
assert cols['exguardian']['version'].startswith('exguardian '), cols['exguardian']
assert cols['bwrap-net']['version'].startswith('bubblewrap '), cols['bwrap-net']
assert 'kernel' in cols['none']['version'] and cols['none']['command'].startswith('sh -c'), cols['none']
for x in cols.values():
    assert set(x['summary']) == {'held', 'ESCAPED', 'FAILED', 'not applicable', 'not run'}, x['summary']
    assert 'network' in x['by_category'] and 'secrets' in x['by_category'], x['by_category'].keys()
    assert x['seconds'] > 0, (x['name'], x['seconds'])  # where a comparison's time goes
assert cols['none']['summary']['ESCAPED'] >= 5 and cols['exguardian']['summary']['ESCAPED'] == 0
"
check "  cells against known facts: none changed the canary and reached the metadata upstream; bwrap-net reached it too; ExGuardian held every probe or says why not" python3 -c "
import json
rows = {r['id']: r['cells'] for r in json.load(open('$J'))['compare']['rows']}
n = lambda i: rows[i]['none']
assert n('cleanup-canaries')['state'] == 'ESCAPED' and '.bashrc changed' in n('cleanup-canaries')['evidence'], n('cleanup-canaries')
assert n('net-direct-metadata')['state'] == 'ESCAPED' and '169.254.169.254' in n('net-direct-metadata')['evidence'], n('net-direct-metadata')
assert n('seed-read-credentials')['state'] == 'ESCAPED' and n('kernel-ptrace-attach')['state'] == 'ESCAPED'
assert n('proc-pid1-signals')['state'] == 'not run' and n('proc-pid1-signals')['evidence'].startswith('not run: unsafe without a sandbox'), n('proc-pid1-signals')
assert n('sandbox-in-place')['state'] == 'not applicable', n('sandbox-in-place')
b = lambda i: rows[i]['bwrap-net']
assert b('net-direct-metadata')['state'] == 'ESCAPED' and b('seed-env-secrets')['state'] == 'ESCAPED', (b('net-direct-metadata'), b('seed-env-secrets'))
assert b('cleanup-cgroups')['state'] == 'not applicable'
# A peer's escape that its own documentation names carries that limit and its source; ExGuardian's cells never do.
f = b('seed-env-secrets').get('finding', {})
assert '--clearenv' in f.get('source', '') and f.get('documented_limit'), b('seed-env-secrets')
assert not [i for i, c in rows.items() if 'finding' in c['exguardian']]
assert not [(i, c['bwrap-net']) for i, c in rows.items() if 'finding' in c['bwrap-net'] and c['bwrap-net']['state'] != 'ESCAPED']
bad = [(i, c['exguardian']) for i, c in rows.items() if not (c['exguardian']['state'] == 'held' or
       (c['exguardian']['state'] in ('not applicable', 'not run') and len(c['exguardian']['evidence']) > 20))]
assert not bad, bad
assert all(c['exguardian']['state'] == 'held' for i, c in rows.items() if i in '${CMP_IDS[*]}'.split())
"
check "  the HTML report has the side-by-side tables, a column per sandbox" python3 -c "
h = open('$T/cmp.html').read()
assert '<h2>Side by side</h2>' in h and h.count('<table class=\"compare\">') == 2, 'no compare tables'
assert ''.join('<th>%s</th>' % n for n in '$CMP'.split(',')) in h, 'no column header per sandbox'
assert 'ExGuardian held' in h
assert 'documented limit: ' in h and 'bwrap(1): --clearenv' in h, 'no documented limit cited'
"
run "$EXG" escape-test --compare exguardian,none --run-arg=--unsafe-no-seccomp --only kernel-ptrace-attach --json "$J"
check "--compare with ExGuardian weakened (--unsafe-no-seccomp): exit 1, its own column escaped ($(grep '^kernel-ptrace-attach' <<<"$OUT"))" \
    bash -c '[ "$1" = 1 ] && grep -q "RESULT: ExGuardian NOT HELD" <<<"$2"' _ "$STATUS" "$OUT"
run "$EXG" escape-test --compare exguardian,exg-no-such-sandbox
check "--compare naming no sandbox: exit 125, one line ($ERR)" bash -c \
    '[ "$1" = 125 ] && grep -q "exg-no-such-sandbox" <<<"$2" && [ "$(wc -l <<<"$2")" = 1 ]' _ "$STATUS" "$ERR"

# ---- podman, default profile and hardened, on the image made above -------------------------------
if [ -n "$PODMAN_WHY" ]; then
    skip "$PODMAN_WHY"
else
    run "$EXG" escape-test --sandbox podman --sandbox-image localhost/exg-escape-bb --json "$J" \
        --only seed-env-secrets --only fd-leak --only seed-read-credentials --only kernel-bpf --only kernel-fork-allowed \
        --only work-write --only proc-pid1 --only net-socks-metadata-ip --only net-direct-metadata
    check "--sandbox podman: in place, probes judged ($(verdicts "$J" sandbox-in-place seed-env-secrets fd-leak kernel-bpf work-write net-direct-metadata))" python3 -c "
import json
p = {x['id']: x for x in json.load(open('$J'))['probes']}
assert p['sandbox-in-place']['verdict'] == 'held', p['sandbox-in-place']
# podman passes neither the caller's environment nor its open fds; its seccomp profile refuses bpf.
for i in ('seed-env-secrets', 'fd-leak', 'seed-read-credentials', 'kernel-bpf', 'kernel-fork-allowed', 'work-write', 'proc-pid1'):
    assert p[i]['verdict'] == 'held', (i, p[i]['verdict'], p[i]['evidence'])
assert p['net-socks-metadata-ip']['evidence'].startswith('not applicable: '), p['net-socks-metadata-ip']
assert p['net-direct-metadata']['verdict'] in ('held', 'ESCAPED', 'skipped'), p['net-direct-metadata']
"
    [ -s "$J" ] || show_last
    # The seed's hardened flags. Without the test's default_ulimits: podman's own default (RLIMIT_NOFILE
    # 1048576) raises the hard limit, refused where the caller's bounding set lacks CAP_SYS_RESOURCE (as
    # here); the preset's explicit rlimits must start it all the same.
    grep -v '^default_ulimits' "$T/pm/containers.conf" > "$T/pm/containers-plain.conf"
    run env CONTAINERS_CONF="$T/pm/containers-plain.conf" "$EXG" escape-test --sandbox podman-hardened \
        --sandbox-image localhost/exg-escape-bb --json "$J" \
        --only sandbox-status --only kernel-bpf --only kernel-unshare-newns --only work-write --only work-tmp
    check "--sandbox podman-hardened (podman's default rlimits): in place, no capability, no new privileges ($(verdicts "$J" sandbox-in-place sandbox-status kernel-unshare-newns work-write work-tmp))" python3 -c "
import json
p = {x['id']: x for x in json.load(open('$J'))['probes']}
for i in ('sandbox-in-place', 'sandbox-status', 'kernel-bpf', 'kernel-unshare-newns', 'work-write', 'work-tmp'):
    assert p[i]['verdict'] == 'held', (i, p[i]['verdict'], p[i]['evidence'])
assert 'CapEff: 0000000000000000' in p['sandbox-status']['evidence'] and 'NoNewPrivs: 1' in p['sandbox-status']['evidence'], p['sandbox-status']
"
    [ -s "$J" ] || show_last
    # gVisor as its users run it: the same image under runsc (podman --runtime runsc).
    if ! command -v runsc >/dev/null; then
        skip "podman-runsc: runsc is not installed"
    else
        run "$EXG" escape-test --sandbox podman-runsc --sandbox-image localhost/exg-escape-bb --dry-run
        check "--dry-run --sandbox podman-runsc: podman with runsc as the runtime, no network" bash -c \
            '[ "$1" = 0 ] && grep -q -- "--runtime runsc --runtime-flag network=none" <<<"$2"' _ "$STATUS" "$OUT"
        run "$EXG" escape-test --sandbox runsc --sandbox-image localhost/exg-escape-bb --dry-run
        check "--dry-run --sandbox runsc (the issue's spelling): the podman-runsc preset" bash -c \
            '[ "$1" = 0 ] && grep -q -- "podman --runtime runsc --runtime-flag network=none" <<<"$2"' _ "$STATUS" "$OUT"
    fi
    podman rmi -f localhost/exg-escape-bb >/dev/null 2>&1
fi
unset CONTAINERS_STORAGE_CONF CONTAINERS_CONF

finish
