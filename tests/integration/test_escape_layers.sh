#!/usr/bin/env bash
# `exguardian escape-test --layer all` runs the same probes against every layer present here
# (process, container with crun/runc, gvisor with runsc): on the default policy nothing escapes on
# any of them, every result names its layer, a probe that cannot apply to a layer is skipped with
# why, and a layer that is not installed is reported as such. A weakened policy is still caught
# on the container layer. (The process layer's own checks are in test_escape_test.sh.)
source "$(dirname "$0")/lib.sh"

J=$T/all.json
H=$T/all.html

present=(process)
{ command -v crun >/dev/null || command -v runc >/dev/null; } && present+=(container)
command -v runsc >/dev/null && present+=(gvisor)
note "layers present: ${present[*]}"
if [ "${#present[@]}" -eq 1 ]; then
    skip "neither crun/runc nor runsc is installed: only the process layer (test_escape_test.sh) applies"
    finish
fi

start=$SECONDS
run "$EXG" escape-test --layer all --json "$J" --html "$H"
took=$((SECONDS - start))
if [ "$STATUS" -eq 0 ]; then ok "escape-test --layer all exits 0 (${took}s)"
else
    fail "escape-test --layer all exits $STATUS (${took}s)"
    grep -E ' (ESCAPED|FAILED) ' <<<"$OUT" | head -20 | sed 's/^/#      /'
fi
for l in "${present[@]}"; do
    line=$(grep -E "^layer $l: " <<<"$OUT" | head -1)
    check "terminal report: per-layer summary for $l ($line)" grep -qE "^layer $l: [0-9]+ held, 0 escaped" <<<"$line"
done
check "JSON: every present layer ran the suite with nothing escaped or failed, no required probe skipped" \
    python3 - "$J" "${present[@]}" <<'PY'
import json, sys
r = json.load(open(sys.argv[1]))
present = sys.argv[2:]
by = {}
for p in r["probes"]:
    assert p.get("layer"), ("no layer", p["id"])
    by.setdefault(p["layer"], []).append(p)
for l in present:
    ps = by.get(l, [])
    assert len(ps) >= 100, (l, len(ps))
    bad = [p["id"] + ": " + p["verdict"] + " " + p["evidence"] for p in ps
           if p["verdict"] in ("ESCAPED", "FAILED") or (p["verdict"] == "skipped" and (p["required"] or not p["evidence"]))]
    assert not bad, (l, bad[:5])
    ids = {p["id"] for p in ps}
    for must in ("sandbox-in-place", "seed-read-credentials", "seed-curl-metadata", "net-allowed-control",
                 "persist-nested-repo-hook", "fd-leak", "stdio-reopen", "planted-snapshot-worktree", "sibling-tmp-read",
                 "cleanup-processes", "cleanup-canaries"):
        assert must in ids, (l, must)
        assert next(p for p in ps if p["id"] == must)["verdict"] == "held", (l, must)
    # A sibling's files in the host's temp trees: every layer here has its own /tmp, /var/tmp and /dev/shm.
    sib = next(p for p in ps if p["id"] == "sibling-tmp-read")["evidence"]
    assert sib.startswith("held by construction: the sandbox has its own /tmp"), (l, sib)
s = {x["layer"]: x for x in r["layers"]}
for l in present:
    assert s[l]["escaped"] == 0 and s[l]["failed"] == 0, s[l]
assert r["summary"]["passed"] is True
for l in ("container", "gvisor"):
    if l not in present:
        assert any(p["id"] == "layer-" + l and p["verdict"] == "skipped" for p in r["probes"]), l
PY
for l in "${present[@]}"; do
    check "HTML report: a row of the $l layer" grep -qF "<td>$l</td>" "$H"
done

# Probes that cannot apply to a layer say why (kept short: the why is in the evidence).
python3 - "$J" <<'PY' | sed 's/^/#      /'
import json, sys
r = json.load(open(sys.argv[1]))
for p in r["probes"]:
    if p["verdict"] == "skipped":
        print(f'{p["layer"]:9} {p["id"]}: {p["evidence"][:120]}')
PY

# A hole is still caught on the container layer: HOME writable.
if [[ " ${present[*]} " == *" container "* ]]; then
    cat > "$T/home.json" <<'JSON'
{"network": {"allowedDomains": [], "deniedDomains": []},
 "filesystem": {"denyRead": [], "allowWrite": ["~"], "denyWrite": []}}
JSON
    # One probe is enough to show the hole is caught (the whole catalogue ran above); the policy
    # given by a relative path, as a user types it (each probe runs in a throwaway workspace).
    run bash -c 'cd "$1" && "$2" escape-test --layer container --policy home.json --only seed-touch-home --json weak.json' \
        _ "$T" "$EXG"
    v=$(python3 -c '
import json, sys
r = json.load(open(sys.argv[1]))
print(next((p["layer"] + " " + p["verdict"] for p in r["probes"] if p["id"] == "seed-touch-home"), "MISSING"))' "$T/weak.json" 2>/dev/null)
    check "container layer, HOME writable: seed-touch-home ESCAPED and a non-zero exit ($v, exit $STATUS)" \
        test "$v" = "container ESCAPED" -a "$STATUS" -ne 0
fi

finish
