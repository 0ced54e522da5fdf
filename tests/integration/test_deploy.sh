#!/usr/bin/env bash
# deploy/ (issue 17), checked client-side (there is no cluster here): every manifest against a
# schema of the fields it uses and the references between the files (tests/deploy/
# check_manifests.py); every handler file loads in exguardian runtime; and the check fails on a
# copy with a broken reference, so it can fail.
. "$(dirname "$0")/lib.sh"

need_source_tree deploy/kustomization.yaml python3
if ! python3 -c 'import jsonschema, yaml, tomllib' 2>/dev/null; then
    fail "python3-jsonschema and python3-yaml are needed (make deps)"; finish
fi
run python3 "$SRC/tests/deploy/check_manifests.py" "$SRC/deploy"
check "deploy/: every check passes ($(grep -c '^ok' <<<"$OUT") of them)" bash -c "[ $STATUS = 0 ] && ! grep -q '^FAIL' <<<\"\$1\"" _ "$OUT"
[ "$STATUS" = 0 ] || note "$(grep '^FAIL' <<<"$OUT")"

for h in "$SRC"/deploy/handlers/*.json; do
    name=$(basename "$h" .json)
    expect_output_contains "handler $name:" "$EXG" runtime --handlers-dir "$SRC/deploy/handlers" --handler "$name" check
done
expect_output_contains "writable: /workspace/out" \
    "$EXG" runtime --handlers-dir "$SRC/deploy/handlers" --handler default check --profile offline

# The handler from the program's name, as the DaemonSet's links and containerd's BinaryName give it.
ln -s "$EXG" "$T/exguardian-runtime-offline"
expect_output_contains "handler offline:" env EXGUARDIAN_HANDLERS_DIR="$SRC/deploy/handlers" "$T/exguardian-runtime-offline" check
ln -s "$EXG" "$T/exguardian-runtime"
expect_output_contains "handler default:" env EXGUARDIAN_HANDLERS_DIR="$SRC/deploy/handlers" "$T/exguardian-runtime" check

# A broken copy: the template names a RuntimeClass that is not there, the pool a template.
cp -r "$SRC/deploy" "$T/deploy"
sed -i 's/runtimeClassName: exguardian$/runtimeClassName: exguardian-typo/; s/    name: python-exguardian$/    name: nope/' \
    "$T/deploy/agent-sandbox/sandbox-template.yaml"
run python3 "$SRC/tests/deploy/check_manifests.py" "$T/deploy"
check "a broken copy fails: unknown RuntimeClass" grep -q '^FAIL - SandboxTemplate python-exguardian: runtimeClassName' <<<"$OUT"
check "a broken copy fails: the pool's template" grep -q '^FAIL - SandboxWarmPool python-exguardian-pool: its template nope' <<<"$OUT"
check "a broken copy: exit 1" test "$STATUS" = 1
finish
