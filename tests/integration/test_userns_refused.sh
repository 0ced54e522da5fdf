#!/usr/bin/env bash
# A host that refuses user namespaces, made here for real (DESIGN.md section 9): a child user
# namespace with user.max_user_namespaces set to 0 inside it, as a container engine or an
# administrator does. There the process layer cannot run, and `exguardian run` must say why
# instead of one bare errno: exit 125, nothing run, one line per fact on stderr naming the cause
# (the call and max_user_namespaces), the layers that would and would not run here, and the ways
# out; `exguardian doctor` says the same.
# - root of a namespace made with `unshare --map-root-user` (its setgroups denied: the run trips
#   on setgroups(0) first, as in issue 42);
# - an ordinary user there (a user namespace made inside it before the limit was set: the
#   limit above it refuses its clone with ENOSPC);
# - as the root runner also: root of a namespace mapping uids 0-65535 onto themselves (maps
#   written by the privileged parent, setgroups allowed) and an ordinary uid in it.
source "$(dirname "$0")/lib.sh"

new_workspace
cd "$WS" || exit 1
me=$(id -u)
WORLD=$T/world
mkdir -p "$WORLD"

# in_self_mapped / as_user_below: lib.sh's userns_refused_as_root / userns_refused_as_user.
in_self_mapped() { userns_refused_as_root "$@"; }
as_user_below() { userns_refused_as_user "$@"; }

# in_identity_mapped CMD...: (root runner) CMD as root of a new user namespace mapping uids
# 0-65535 onto themselves, maps written from here (setgroups allowed), max_user_namespaces=0.
in_identity_mapped() {
    rm -f "$WORLD/go"; mkfifo "$WORLD/go"
    # (the maps come after unshare: the re-exec as uid 0 of the namespace regains its capabilities)
    local inner='echo 0 >/proc/sys/user/max_user_namespaces || { echo "world: cannot set the limit" >&2; exit 99; }; exec timeout 60 "$@"'
    unshare --user -- bash -c 'read -r _ <"$1"; shift; exec bash -c "$0" _ "$@"' "$inner" "$WORLD/go" "$@" \
        >"$WORLD/out" 2>"$WORLD/err" &
    local pid=$! mine
    mine=$(readlink /proc/self/ns/user)
    while [ "$(readlink "/proc/$pid/ns/user" 2>/dev/null)" = "$mine" ] && kill -0 "$pid" 2>/dev/null; do sleep 0.01; done
    echo "0 0 65536" >"/proc/$pid/uid_map" && echo "0 0 65536" >"/proc/$pid/gid_map"
    echo go >"$WORLD/go"
    wait "$pid"
    STATUS=$?
    OUT=$(cat "$WORLD/out") ERR=$(cat "$WORLD/err")
}

# refused WHO: the assertions on the last run of `exguardian run -- echo hi` there.
refused() {
    local who=$1
    check "$who: exit 125 (status $STATUS)" test "$STATUS" = 125
    check "$who: nothing ran (no 'hi' on stdout)" test -z "$OUT"
    [ "$STATUS" = 125 ] && [ -z "$OUT" ] || show_last
    check "$who: every stderr line is one 'exguardian: ' fact" \
        test -z "$(printf '%s\n' "$ERR" | grep -v '^exguardian: ')"
    check "$who: it names the cause: user.max_user_namespaces is 0" \
        grep -q '^exguardian: cause: .*max_user_namespaces is 0' <<<"$ERR"
    check "$who: it names the layers that would run here" grep -q '^exguardian: layers that would run here: ' <<<"$ERR"
    check "$who: ... and those that would not (process, microvm, gvisor)" \
        grep -qE '^exguardian: layers that would not: process .*microvm .*gvisor ' <<<"$ERR"
    check "$who: it gives a way out (the sysctl)" \
        grep -qE '^exguardian: way out: .*sysctl -w user\.max_user_namespaces=' <<<"$ERR"
    check "$who: it says it is inside a user namespace" grep -q '^exguardian: inside: a user namespace' <<<"$ERR"
}

# ---- root of a namespace with setgroups denied (issue 42's first case) ---------------------------
in_self_mapped "$EXG" run -- echo hi
refused "root, setgroups denied"
check "root, setgroups denied: the first line is the call that failed (setgroups)" \
    grep -q '^exguardian: setgroups: ' <<<"$(head -1 <<<"$ERR")"
check "root, setgroups denied: it says why setgroups fails (/proc/self/setgroups: deny)" \
    grep -q '^exguardian: cause: setgroups(0) as root of a user namespace whose setgroups is denied' <<<"$ERR"
check "root, setgroups denied: the probe's own call and errno (clone(CLONE_NEWUSER) ... ENOSPC)" \
    grep -q '^exguardian: cause: clone(CLONE_NEWUSER) as uid 0: ENOSPC' <<<"$ERR"
check "root: no layer runs here, the container layer neither (as root its writable paths are idmapped through a user namespace)" \
    grep -q '^exguardian: layers that would not: .*container (as root: its writable paths are idmapped mounts' <<<"$ERR"
# What the lines say of the other layers is what they do here: each one is refused too, with the same explanation.
for L in container gvisor; do
    [ "$L" = container ] && ! command -v crun >/dev/null && ! command -v runc >/dev/null && continue
    [ "$L" = gvisor ] && ! command -v runsc >/dev/null && continue
    in_self_mapped "$EXG" run --layer "$L" -- echo hi
    check "root, setgroups denied: --layer $L is refused too (status $STATUS, nothing ran) and explained" \
        bash -c '[ "$1" = 125 ] && [ -z "$2" ] && grep -q "^exguardian: cause: .*max_user_namespaces is 0" <<<"$3"' _ "$STATUS" "$OUT" "$ERR"
done
in_self_mapped "$EXG" doctor
check "doctor there (root): status 0 and 'user namespaces refused:' with the cause" \
    bash -c '[ "$1" = 0 ] && grep -q "^user namespaces refused:" <<<"$2" && grep -q "max_user_namespaces is 0" <<<"$2" && grep -q "way out: " <<<"$2"' \
    _ "$STATUS" "$OUT"
[ "$STATUS" = 0 ] || show_last

# ---- an ordinary user there ----------------------------------------------------------------------
as_user_below "$EXG" run -- echo hi
check "ordinary user: exit 125 (status $STATUS)" test "$STATUS" = 125
check "ordinary user: nothing ran" test -z "$OUT"
[ "$STATUS" = 125 ] || show_last
check "ordinary user: every stderr line is one 'exguardian: ' fact" test -z "$(printf '%s\n' "$ERR" | grep -v '^exguardian: ')"
check "ordinary user: the call and errno (clone(CLONE_NEWUSER) as uid 1000: ENOSPC)" \
    grep -q '^exguardian: cause: clone(CLONE_NEWUSER) as uid 1000: ENOSPC' <<<"$ERR"
check "ordinary user: the cause is a max_user_namespaces limit above this namespace" \
    grep -q '^exguardian: cause: ENOSPC from clone(CLONE_NEWUSER): a user.max_user_namespaces limit is reached in a user namespace above this one' <<<"$ERR"
check "ordinary user: no layer runs here for it (every one makes a user namespace)" \
    grep -qE '^exguardian: layers that would run here: (none|landlock), as uid 1000' <<<"$ERR"
check "ordinary user: container among those that would not (rootless)" \
    grep -q '^exguardian: layers that would not: .*container (rootless' <<<"$ERR"
check "ordinary user: a way out (raise the limit where it is reached)" \
    grep -q '^exguardian: way out: raise user.max_user_namespaces' <<<"$ERR"
as_user_below "$EXG" doctor
check "doctor there (ordinary user): 'user namespaces refused:' naming max_user_namespaces" \
    bash -c '[ "$1" = 0 ] && grep -q "^user namespaces refused:" <<<"$2" && grep -q "max_user_namespaces" <<<"$2"' _ "$STATUS" "$OUT"
as_user_below "$EXG" doctor --json
check "doctor --json there: userns_refusal lists the facts" \
    bash -c 'jq -e ".userns_refusal | length > 2" <<<"$1" >/dev/null' _ "$OUT"

# ---- (root runner) the identity-mapped namespace of DESIGN.md: setgroups allowed ------------------
if [ "$me" = 0 ]; then
    in_identity_mapped "$EXG" run -- echo hi
    refused "root, 0-65535 mapped"
    check "root, 0-65535 mapped: the run's own call failed: creating the namespaces (ENOSPC)" \
        grep -q '^exguardian: create namespaces: No space left on device' <<<"$(head -1 <<<"$ERR")"
    UWS=$T/uws
    mkdir -p "$UWS" && chown exgtest: "$UWS"
    uid=$(id -u exgtest) gid=$(id -g exgtest)
    in_identity_mapped setpriv --reuid="$uid" --regid="$gid" --clear-groups -- \
        bash -c 'cd "$1" && shift && exec "$@"' _ "$UWS" "$EXG" run -- echo hi
    refused "uid $uid (exgtest), 0-65535 mapped"
    check "uid $uid: the call and errno (clone(CLONE_NEWUSER) as uid $uid: ENOSPC)" \
        grep -q "^exguardian: cause: clone(CLONE_NEWUSER) as uid $uid: ENOSPC" <<<"$ERR"
    check "uid $uid: no layer runs here for it" grep -qE "^exguardian: layers that would run here: (none|landlock), as uid $uid" <<<"$ERR"
    # As root there (setgroups allowed) the container layer gets past setgroups and is refused at its idmap.
    if command -v crun >/dev/null || command -v runc >/dev/null; then
        in_identity_mapped "$EXG" run --layer container -- echo hi
        check "root, 0-65535 mapped: --layer container is refused (status $STATUS) at its idmap's user namespace, and explained" \
            bash -c '[ "$1" = 125 ] && [ -z "$2" ] && grep -q "^exguardian: clone a user namespace for an idmapped mount" <<<"$3" && grep -q "^exguardian: cause: .*max_user_namespaces is 0" <<<"$3"' \
            _ "$STATUS" "$OUT" "$ERR"
    fi
    in_identity_mapped setpriv --reuid="$uid" --regid="$gid" --clear-groups -- "$EXG" doctor
    check "doctor there (uid $uid): 'user namespaces refused:' naming max_user_namespaces is 0" \
        bash -c '[ "$1" = 0 ] && grep -q "^user namespaces refused:" <<<"$2" && grep -q "max_user_namespaces is 0" <<<"$2"' _ "$STATUS" "$OUT"
fi

# ---- and where user namespaces work, doctor says nothing of the kind -------------------------------
run timeout 60 "$EXG" doctor
check "doctor on this host: no 'user namespaces refused' section" \
    bash -c '[ "$1" = 0 ] && ! grep -q "^user namespaces refused:" <<<"$2"' _ "$STATUS" "$OUT"

finish
