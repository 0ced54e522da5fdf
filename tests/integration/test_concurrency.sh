#!/usr/bin/env bash
# Sandboxes started at the same time never affect each other (issue 19, part 3).
#
#  1. The stale-cgroup sweep takes only what is provably dead: supervisors in their own pid
#     namespaces (their pid in the cgroup's name is dead out here) launch while others, out
#     here, sweep at every start; no launch may lose its cgroup (before the liveness lock,
#     about one in six did: "attach ...: No such file or directory").
#  2. 20 sandboxes at once (process, container, gVisor; as root and as the user exgtest), each
#     running a few escape-test probes and ordinary work: every probe's verdict and every exit
#     status is what the same sandbox gave when it ran alone, and nothing is left behind
#     (their supervisors, cgroups, /var/tmp layer directories, mounts, processes).
#  3. escape-test (a subset of probes, --only) gives the same verdicts on a loaded machine (two
#     busy CPUs, made here) as on a quiet one.
#
# Other sandboxes (other tests, other people) may run meanwhile: leftovers are counted only by
# the pids of the supervisors this script started and the marker in their commands.
source "$(dirname "$0")/lib.sh"

if [ "$EXG_AS" != root ]; then
    # Pid namespaces with chosen pids, and sandboxes as two users, need root; the root run
    # starts half of its sandboxes as the unprivileged user.
    echo "# skip - the concurrency test runs as root (it starts sandboxes as root and as exgtest)"
    exit 0
fi
USER_NAME=exgtest
id -u "$USER_NAME" >/dev/null 2>&1 || { fail "no user $USER_NAME (run.sh creates it)"; finish; }

layers=(process)
if command -v crun >/dev/null || command -v runc >/dev/null; then layers+=(container)
else skip "container layer: neither crun nor runc installed"; fi
if command -v runsc >/dev/null; then layers+=(gvisor)
else skip "gvisor layer: runsc not installed"; fi
note "layers: ${layers[*]}"

# ---- 1. the sweep and a launch in another pid namespace ------------------------------------------
# A pid number that is free out here: the supervisor in the new namespace gets it (ns_last_pid),
# so its cgroup's name carries a pid that a sweep out here finds dead.
# Other exguardian binaries on this host (older ones, without the liveness lock) would sweep
# these cgroups too: on cgroup v1 the race runs in a mount namespace where a private subtree
# (<hierarchy>/exg-conc-PID) is bound over every hierarchy, so only this test's supervisors
# see its sandboxes' cgroups.
CGW=exg-conc-$$
cg_mounts=$(findmnt -rn -t cgroup -o TARGET 2>/dev/null || true)
for m in $cg_mounts; do mkdir -p "$m/$CGW"; done
cat > "$T/race.sh" <<'RACE'
EXG=$1 WS=$2 STOP=$3 VICTIMS=$4 CGW=$5
shift 5
for m in "$@"; do mount --bind "$m/$CGW" "$m" || { echo "lost=-1 ran=0 err=bind $m"; exit 1; }; done
free_pid() {
    local p
    for p in $(seq 20000 37 32000); do [ -e "/proc/$p" ] || { echo "$p"; return 0; }; done
    return 1
}
sweeper() {  # every `exguardian run` sweeps stale cgroups once before its launch
    cd "$WS" || exit 1
    while [ ! -e "$STOP" ]; do "$EXG" run --no-policy-files -- true >/dev/null 2>&1; done
}
sweeper & s1=$!
sweeper & s2=$!
lost=0 ran=0 first_err=""
for i in $(seq "$VICTIMS"); do
    p=$(free_pid) || break
    out=$(cd "$WS" && unshare --pid --fork --mount-proc \
        sh -c 'echo "$1" > /proc/sys/kernel/ns_last_pid && "$2" run --no-policy-files -- true' _ $((p - 1)) "$EXG" 2>&1)
    rc=$?
    ran=$((ran + 1))
    if [ "$rc" -ne 0 ]; then lost=$((lost + 1)); [ -z "$first_err" ] && first_err="exit $rc: $out"; fi
done
touch "$STOP"
wait "$s1" "$s2"
echo "lost=$lost ran=$ran err=$first_err"
RACE
RACE_WS=$T/race-ws
mkdir -p "$RACE_WS"
VICTIMS=${EXG_RACE_LAUNCHES:-25}
# shellcheck disable=SC2086
race=$(unshare --mount --propagation private bash "$T/race.sh" "$EXG" "$RACE_WS" "$T/race.stop" "$VICTIMS" "$CGW" $cg_mounts)
lost=$(sed -n 's/^lost=\(-\?[0-9]*\) .*/\1/p' <<<"$race") ran=$(sed -n 's/.* ran=\([0-9]*\) .*/\1/p' <<<"$race")
check "${ran:-0} launches in their own pid namespaces, 2 sweeping supervisors out here: none lost its cgroup (${lost:-?} failed)" \
    test "${ran:-0}" -eq "$VICTIMS" -a "${lost:-1}" -eq 0
[ "${lost:-1}" != 0 ] && note "${race#*err=}"
for m in $cg_mounts; do
    rmdir "$m/$CGW/exguardian" 2>/dev/null
    rmdir "$m/$CGW" 2>/dev/null || note "left: $m/$CGW"
done

# ---- 2. 20 sandboxes at once ---------------------------------------------------------------------
MARK=EXGCONC-$$-$RANDOM
PROBES="ptrace-attach bpf io-uring-setup unshare-newuser mount-tmpfs tiocsti x32-socket socket-vsock
chmod-setuid fork-allowed thread-allowed socket-inet-tcp-allowed"
# The command of sandbox N: probes (one "name status" line each), ordinary work in the
# workspace, a short sleep so that they overlap, and an exit status of its own.
sandbox_script() {
    cat <<EOF
: $MARK-$1
for p in $(echo $PROBES); do /run/exguardian/exguardian probe "\$p" >/dev/null 2>&1; echo "probe \$p \$?"; done
seq 1 30000 | sha256sum | cut -c1-16
printf 'work %s\n' "$1" > result.txt && cat result.txt && rm result.txt
(sleep 0.3; echo child done) & wait
exit $(( $1 % 7 + 3 ))
EOF
}
N=20
declare -a CFG_LAYER CFG_USER CFG_MODE CFG_CMD
for i in $(seq 0 $((N - 1))); do
    CFG_LAYER[$i]=${layers[$((i % ${#layers[@]}))]}
    if [ $((i / ${#layers[@]} % 2)) -eq 0 ]; then CFG_USER[$i]=root; else CFG_USER[$i]=$USER_NAME; fi
    # Some in discard mode: their writes go to a /var/tmp/exguardian-<pid>-<id> layer directory.
    if [ $((i % 4)) -eq 3 ]; then CFG_MODE[$i]=discard; else CFG_MODE[$i]=live; fi
    ws=$T/ws-$i
    mkdir -p "$ws"
    CFG_CMD[$i]=$(sandbox_script "$i")  # (the sandbox has its own /tmp: the script goes in by argument)
    [ "${CFG_USER[$i]}" = root ] || chown "$USER_NAME:" "$ws"
done

# start_sandbox I TAG: in the background; its supervisor's pid in SPID[I].
declare -a SPID
start_sandbox() {
    local i=$1 tag=$2
    local args=(run --no-policy-files --layer "${CFG_LAYER[$i]}" --workspace-mode "${CFG_MODE[$i]}" --timeout 120s
                -- bash -c "${CFG_CMD[$i]}")
    if [ "${CFG_USER[$i]}" = root ]; then
        (cd "$T/ws-$i" && exec "$EXG" "${args[@]}") >"$T/$tag-$i.out" 2>"$T/$tag-$i.err" </dev/null &
    else
        (cd "$T/ws-$i" && exec setpriv --reuid="$USER_NAME" --regid="$(id -g "$USER_NAME")" --init-groups \
            --reset-env -- "$EXG" "${args[@]}") >"$T/$tag-$i.out" 2>"$T/$tag-$i.err" </dev/null &
    fi
    SPID[$i]=$!
}
# Alone: one sandbox of each (layer, user) pair, the first 2 x layers (sandbox i's pair is
# that of i mod 2 x layers); the others' work differs only in their number and exit status.
REFS=$((2 * ${#layers[@]}))
declare -a SOLO_RC CONC_RC
for i in $(seq 0 $((REFS - 1))); do
    start_sandbox "$i" solo
    wait "${SPID[$i]}"
    SOLO_RC[$i]=$?
done
solo_ok=1
for i in $(seq 0 $((REFS - 1))); do
    want=$(( i % 7 + 3 ))
    if [ "${SOLO_RC[$i]}" != "$want" ] || ! grep -q "^work $i$" "$T/solo-$i.out"; then
        solo_ok=0
        fail "sandbox $i alone (${CFG_LAYER[$i]}, ${CFG_USER[$i]}, ${CFG_MODE[$i]}): exit ${SOLO_RC[$i]}, $want expected"
        sed 's/^/#      /' "$T/solo-$i.err" | head -5
    fi
done
[ "$solo_ok" = 1 ] && ok "$REFS sandboxes one at a time (each layer, as root and as $USER_NAME): each ran its work and exited with its own status"

start=$SECONDS
for i in $(seq 0 $((N - 1))); do start_sandbox "$i" conc; done
for i in $(seq 0 $((N - 1))); do wait "${SPID[$i]}"; CONC_RC[$i]=$?; done
note "20 at once took $((SECONDS - start)) s"
same=0
for i in $(seq 0 $((N - 1))); do
    desc="sandbox $i (${CFG_LAYER[$i]}, ${CFG_USER[$i]}, ${CFG_MODE[$i]})"
    ref=$((i % REFS))
    if [ "${CONC_RC[$i]}" != $(( i % 7 + 3 )) ]; then
        fail "$desc at once: exit ${CONC_RC[$i]}, $(( i % 7 + 3 )) expected (as its run alone would give)"
        sed 's/^/#      /' "$T/conc-$i.err" | head -5
    elif ! diff <(grep -v '^exguardian:' "$T/solo-$ref.out" | sed "s/^work $ref\$/work $i/") \
                <(grep -v '^exguardian:' "$T/conc-$i.out") >"$T/diff-$i"; then
        fail "$desc at once: output differs from its run alone"
        sed 's/^/#      /' "$T/diff-$i" | head -8
    else
        same=$((same + 1))
    fi
done
probes_n=$(grep -c '^probe ' "$T/solo-0.out")
check "20 sandboxes at once: every probe verdict ($probes_n each), output and exit status as alone ($same/20)" test "$same" = 20

# Nothing of theirs is left: by their supervisors' pids (cgroups exg-<pid>-*, layer dirs
# /var/tmp/exguardian-<pid>-*) and the marker in their commands (processes, mounts).
left=()
for i in $(seq 0 $((N - 1))); do
    p=${SPID[$i]}
    for d in /sys/fs/cgroup/*/exguardian/exg-"$p"-* /sys/fs/cgroup/exguardian/exg-"$p"-* /var/tmp/exguardian-"$p"-*; do
        [ -e "$d" ] && left+=("$d")
    done
    if [ -r "/proc/$p/cmdline" ] && tr '\0' ' ' <"/proc/$p/cmdline" | grep -q exguardian; then left+=("supervisor $p"); fi
done
for p in $(pgrep -f -- "$MARK" || true); do left+=("process $p: $(tr '\0' ' ' <"/proc/$p/cmdline" 2>/dev/null | head -c 80)"); done
while read -r m; do left+=("mount: $m"); done < <(grep -F -- "$T/ws-" /proc/self/mountinfo | awk '{print $5}')
if [ ${#left[@]} -eq 0 ]; then ok "nothing left by the $((N + REFS)) sandboxes (supervisors, cgroups, /var/tmp layer dirs, processes, mounts)"
else fail "left behind: ${left[*]}"; fi

# ---- 3. escape-test on a loaded machine --------------------------------------------------------
ONLY=(kernel-io-uring-setup kernel-bpf kernel-tiocsti kernel-x32-socket kernel-socket-vsock kernel-unshare-newuser
      proc-host-processes fd-leak seed-touch-home seed-read-credentials seed-env-secrets
      work-git-commit)  # (the cleanup probes always run)
only_args=()
for id in "${ONLY[@]}"; do only_args+=(--only "$id"); done
verdicts() {  # JSON report -> "id verdict" lines
    python3 -c '
import json, sys
for p in json.load(open(sys.argv[1]))["probes"]:
    print(p["layer"], p["id"], p["verdict"])' "$1"
}
run "$EXG" escape-test "${only_args[@]}" --json "$T/quiet.json"
quiet_rc=$STATUS
check "escape-test (${#ONLY[@]} probes) on a quiet machine: exit 0 (got $quiet_rc)" test "$quiet_rc" = 0
busy() { while :; do :; done; }
busy & b1=$!; track_bg "$b1"
busy & b2=$!; track_bg "$b2"
run "$EXG" escape-test "${only_args[@]}" --json "$T/loaded.json"
loaded_rc=$STATUS
kill "$b1" "$b2" 2>/dev/null
wait "$b1" "$b2" 2>/dev/null
check "escape-test on a loaded machine (2 busy CPUs): exit $quiet_rc as on the quiet one (got $loaded_rc)" \
    test "$loaded_rc" = "$quiet_rc"
if [ -s "$T/quiet.json" ] && [ -s "$T/loaded.json" ]; then
    q=$(verdicts "$T/quiet.json") l=$(verdicts "$T/loaded.json")
    missing=()
    for id in "${ONLY[@]}"; do grep -q " $id held$" <<<"$q" || missing+=("$id"); done
    check "  every selected probe ran and held on the quiet machine ($(grep -c . <<<"$q") in the report${missing[*]:+; not: ${missing[*]}})" \
        test ${#missing[@]} -eq 0
    if [ "$q" = "$l" ]; then ok "  every verdict the same, loaded and quiet"
    else fail "  verdicts differ (quiet < > loaded)"; diff <(echo "$q") <(echo "$l") | sed 's/^/#      /' | head -10; fi
else
    fail "  escape-test wrote no JSON report"
fi

# --only with an id the catalogue does not have: one clear error, nothing run.
run "$EXG" escape-test --only no-such-probe
check "escape-test --only no-such-probe: exit 125 naming it (got $STATUS)" \
    bash -c '[ "$1" = 125 ] && grep -q "no-such-probe" <<<"$2" && [ "$(grep -c . <<<"$2")" = 1 ]' _ "$STATUS" "$ERR"

finish
