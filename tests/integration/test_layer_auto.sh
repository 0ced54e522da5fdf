#!/usr/bin/env bash
# --layer auto (issue 42, 2): the strongest layer whose walls this host can put up for this
# policy (microvm > gvisor > container > process), said on every run in one line on stderr, in
# the audit log, in --dry-run's plan, by doctor and by recommend; with a minimum the run
# refuses to go below (--min-layer, "minLayer"), naming why each stronger layer cannot run.
# - on this host: the layer it picks is the strongest whose runtime is installed (worked out
#   here from the host, not from exguardian), and the command runs there;
# - a policy that lets a host Unix socket in: gvisor and microvm cannot carry one, auto steps
#   down and says so; with --min-layer above what is left: refused (125), nothing ran;
# - user namespaces refused (lib.sh's max_user_namespaces=0 world), as root of it and as an
#   ordinary user in it: no layer runs, auto refuses with each layer's reason and the cause.
source "$(dirname "$0")/lib.sh"

new_workspace
cd "$WS" || exit 1
me=$(id -u)

# What should win here, from the host itself: each layer's runtime (rootless needs crun), the
# microVM's qemu and guest image. User namespaces work on this host (the other tests need them).
with_sockets=process
if command -v crun >/dev/null || { [ "$me" = 0 ] && command -v runc >/dev/null; }; then with_sockets=container; fi
strongest=$with_sockets
command -v runsc >/dev/null && strongest=gvisor
[ -x /usr/bin/qemu-system-x86_64 ] && [ -s "${EXG_MICROVM_IMAGE_DIR:-/nonexistent}/vmlinux" ] && strongest=microvm
note "expected here: $strongest (a policy with host Unix sockets: $with_sockets)"

auto_lines() { grep -c '^exguardian: layer auto' <<<"$ERR"; }

# ---- this host ----------------------------------------------------------------------------------
run "$EXG" run --layer auto --audit-log "$T/audit.jsonl" -- echo hi
check "auto here: the command ran (status $STATUS, stdout 'hi')" bash -c '[ "$1" = 0 ] && [ "$2" = hi ]' _ "$STATUS" "$OUT"
[ "$STATUS" = 0 ] || show_last
check "auto here: one line on stderr says it chose $strongest" \
    bash -c '[ "$(grep -c "^exguardian: layer auto" <<<"$1")" = 1 ] && grep -q "^exguardian: layer auto: chose $2 (" <<<"$1"' _ "$ERR" "$strongest"
check "auto here: the audit log's layer_auto line names $strongest" \
    audit_has "$T/audit.jsonl" "{\"event\": \"layer_auto\", \"chosen\": \"$strongest\", \"minimum\": null}"
check "auto here: the audit line lists all five layers with a verdict" \
    python3 -c 'import json,sys; l=[json.loads(x) for x in open(sys.argv[1]) if "layer_auto" in x][0]; sys.exit(0 if [e["layer"] for e in l["layers"]]==["microvm","gvisor","container","process","landlock"] else 1)' "$T/audit.jsonl"
run "$EXG" run --layer auto --dry-run -- echo hi
check "auto --dry-run: the plan says the choice (layer auto: chose $strongest) and the layer's own lines (layer: $strongest)" \
    bash -c '[ "$1" = 0 ] && grep -q "layer auto: chose $3 (" <<<"$2" && grep -qE "(^| )layer: $3" <<<"$2"' _ "$STATUS" "$OUT" "$strongest"
[ "$STATUS" = 0 ] || show_last
run "$EXG" doctor
check "doctor: the same choice under layers (layer auto: chose $strongest)" grep -q "^  layer auto: chose $strongest (" <<<"$OUT"
run "$EXG" doctor --json
check "doctor --json: .auto.chosen is $strongest" bash -c '[ "$(jq -r .auto.chosen <<<"$1")" = "$2" ]' _ "$OUT" "$strongest"
run "$EXG" recommend --situation ci
check "recommend: the same choice (this host, layer auto: chose $strongest)" grep -q "^this host, layer auto: chose $strongest (" <<<"$OUT"

# The policy's "layer": "auto" with its "minLayer".
printf '{"layer": "auto", "minLayer": "process"}\n' >"$T/auto.json"
run "$EXG" run --policy "$T/auto.json" -- echo hi
check "policy \"layer\": \"auto\": ran on $strongest, saying the minimum" \
    bash -c '[ "$1" = 0 ] && [ "$2" = hi ] && grep -q "^exguardian: layer auto (at least process): chose $3 (" <<<"$4"' \
    _ "$STATUS" "$OUT" "$strongest" "$ERR"
[ "$STATUS" = 0 ] || show_last

# ---- what this policy asks: host Unix sockets ----------------------------------------------------
printf '{"network": {"allowAllUnixSockets": true}}\n' >"$T/sockets.json"
run "$EXG" run --layer auto --policy "$T/sockets.json" -- echo hi
check "host Unix sockets: auto chose $with_sockets and ran" \
    bash -c '[ "$1" = 0 ] && [ "$2" = hi ] && grep -q "^exguardian: layer auto: chose $3 (" <<<"$4"' _ "$STATUS" "$OUT" "$with_sockets" "$ERR"
[ "$STATUS" = 0 ] || show_last
if [ "$strongest" = microvm ] || [ "$strongest" = gvisor ]; then
    check "host Unix sockets: the line says why not $strongest (it cannot carry a host Unix socket)" \
        grep -q "; not $strongest: this policy lets a host Unix socket in" <<<"$ERR"
fi
# A minimum above what runs for this policy: refused, why for each stronger one, what runs below.
run "$EXG" run --layer auto --min-layer gvisor --policy "$T/sockets.json" -- echo hi
check "--min-layer gvisor with host Unix sockets: refused (125), nothing ran" \
    bash -c '[ "$1" = 125 ] && [ -z "$2" ]' _ "$STATUS" "$OUT"
[ "$STATUS" = 125 ] || show_last
check "... every stderr line is one 'exguardian: ' fact" test -z "$(printf '%s\n' "$ERR" | grep -v '^exguardian: ')"
check "... it says auto refused, at least gvisor" \
    grep -q '^exguardian: layer auto (at least gvisor): refused: no layer at or above gvisor can run here for this policy' <<<"$ERR"
check "... why microvm cannot run" grep -q '^exguardian: layer auto: microvm cannot run: ' <<<"$ERR"
check "... why gvisor cannot run" grep -q '^exguardian: layer auto: gvisor cannot run: ' <<<"$ERR"
check "... what would run below the minimum ($with_sockets)" \
    grep -qE "^exguardian: layer auto: (.* )?$with_sockets(,? .*)? would run, but (is|are) below the minimum gvisor" <<<"$ERR"
run "$EXG" run --layer auto --min-layer gvisor --policy "$T/sockets.json" --dry-run -- echo hi
check "... --dry-run is refused the same way" bash -c '[ "$1" = 125 ] && grep -q "refused: no layer at or above gvisor" <<<"$2"' _ "$STATUS" "$ERR"
# A named layer below the minimum, from the flag or the policy.
run "$EXG" run --layer process --min-layer container -- echo hi
check "--layer process --min-layer container: refused (125), nothing ran, naming the minimum" \
    bash -c '[ "$1" = 125 ] && [ -z "$2" ] && grep -q "below the minimum layer container" <<<"$3"' _ "$STATUS" "$OUT" "$ERR"
printf '{"minLayer": "gvisor"}\n' >"$T/min.json"
run "$EXG" run --policy "$T/min.json" -- echo hi
check "policy \"minLayer\": \"gvisor\" on the default process layer: refused (125), nothing ran" \
    bash -c '[ "$1" = 125 ] && [ -z "$2" ] && grep -q "below the minimum layer gvisor" <<<"$3"' _ "$STATUS" "$OUT" "$ERR"
run "$EXG" run --layer auto --runtime runc -- echo hi
check "--layer auto --runtime: refused (the flag belongs to one layer)" \
    bash -c '[ "$1" = 125 ] && grep -q "^exguardian: --runtime: not with --layer auto" <<<"$2"' _ "$STATUS" "$ERR"

# ---- user namespaces refused: no layer runs ------------------------------------------------------
# refused_everywhere WHO [MIN]: the assertions on the last `run --layer auto` there.
refused_everywhere() {
    local who=$1 head="layer auto: refused"
    [ -n "${2:-}" ] && head="layer auto (at least $2): refused"
    check "$who: exit 125, nothing ran (status $STATUS)" bash -c '[ "$1" = 125 ] && [ -z "$2" ]' _ "$STATUS" "$OUT"
    [ "$STATUS" = 125 ] || show_last
    check "$who: every stderr line is one 'exguardian: ' fact" test -z "$(printf '%s\n' "$ERR" | grep -v '^exguardian: ')"
    check "$who: the first line says auto refused" grep -q "^exguardian: $head: no layer" <<<"$(head -1 <<<"$ERR")"
    local l
    for l in microvm gvisor container process; do
        [ -n "${2:-}" ] && [ "$l" = process ] && [ "$2" != process ] && continue  # (below the minimum)
        check "$who: why $l cannot run" grep -q "^exguardian: layer auto: $l cannot run: " <<<"$ERR"
    done
    if [ -z "${2:-}" ]; then
        check "$who: the process layer lacks user namespaces" \
            grep -q '^exguardian: layer auto: process cannot run: missing: user namespaces' <<<"$ERR"
    else
        check "$who: nothing below the minimum would run either (no 'would run' line)" \
            bash -c '! grep -q "would run, but" <<<"$1"' _ "$ERR"
    fi
    # (root of the namespace: its own limit is 0; a user below it: a limit above it is reached)
    check "$who: the cause (a user.max_user_namespaces limit) and a way out" \
        bash -c 'grep -q "^exguardian: cause: .*max_user_namespaces" <<<"$1" && grep -q "^exguardian: way out: " <<<"$1"' _ "$ERR"
}
userns_refused_as_root "$EXG" run --layer auto -- echo hi
refused_everywhere "root, user namespaces refused"
userns_refused_as_root "$EXG" run --layer auto --min-layer container --dry-run -- echo hi
refused_everywhere "root, user namespaces refused, --min-layer container --dry-run" container
# An ordinary user there: the landlock layer (no namespaces) is what is left, and auto says so
# (its walls are tested in test_landlock_layer.sh); with a minimum above it, refused as before.
userns_refused_as_user "$EXG" run --layer auto -- echo hi
check "uid 1000, user namespaces refused: auto runs on landlock (status $STATUS) and says why not process" \
    bash -c '[ "$1" = 0 ] && [ "$2" = hi ] && grep -q "^exguardian: layer auto: chose landlock .*not process: missing: user namespaces" <<<"$3"' \
    _ "$STATUS" "$OUT" "$ERR"
[ "$STATUS" = 0 ] || show_last
userns_refused_as_user "$EXG" run --layer auto --min-layer process -- echo hi
check "uid 1000, user namespaces refused, --min-layer process: refused (125), nothing ran, landlock named as below it" \
    bash -c '[ "$1" = 125 ] && [ -z "$2" ] && grep -q "^exguardian: layer auto (at least process): refused" <<<"$3" && grep -q "landlock would run, but is" <<<"$3"' \
    _ "$STATUS" "$OUT" "$ERR"
userns_refused_as_user "$EXG" doctor
check "doctor there: auto would choose landlock" grep -q "^  layer auto: chose landlock" <<<"$OUT"

finish
