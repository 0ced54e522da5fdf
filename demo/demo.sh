#!/usr/bin/env bash
# The seed's escape lines, run inside `exguardian run` the way an agent would run them, against
# a throwaway workspace and a fake HOME holding canaries. Each line must be "held": it fails or
# prints nothing, the canary never shows, and nothing changes on the host.
# Usage: EXG=build/exguardian bash demo/demo.sh     (exits non-zero if anything escaped)
set -uo pipefail

root=$(cd "$(dirname "$0")/.." && pwd)
EXG=${EXG:-$root/build/exguardian}
if [ ! -x "$EXG" ]; then echo "demo: no exguardian binary at $EXG (run make build)" >&2; exit 1; fi
EXG=$(readlink -f "$EXG")

D=$(mktemp -d /tmp/exg-demo.XXXXXX)
chmod 755 "$D"
trap 'rm -rf --one-file-system "$D"' EXIT
ws=$D/workspace
home=$D/home
canary="EXGCANARY-$(od -An -N8 -tx1 /dev/urandom | tr -d ' \n')"

# The workspace: a git repo with a hook.
mkdir -p "$ws" "$home/.ssh" "$home/.aws"
git -C "$ws" -c init.defaultBranch=main init -q .
echo "# demo" > "$ws/README.md"
git -C "$ws" add README.md
git -C "$ws" -c user.name=demo -c user.email=demo@example.invalid commit -q -m initial
printf '#!/bin/sh\necho original hook\n' > "$ws/.git/hooks/pre-commit"
chmod 755 "$ws/.git/hooks/pre-commit"
hook_before=$(sha256sum < "$ws/.git/hooks/pre-commit")

# The fake HOME with canaries (world-readable: only the sandbox keeps them from the command).
printf -- '-----BEGIN OPENSSH PRIVATE KEY-----\n%s\n-----END OPENSSH PRIVATE KEY-----\n' "$canary" > "$home/.ssh/id_ed25519"
printf '[default]\naws_secret_access_key = %s\n' "$canary" > "$home/.aws/credentials"
chmod 755 "$home" "$home/.ssh" "$home/.aws"
chmod 644 "$home/.ssh/id_ed25519" "$home/.aws/credentials"

# Runs LINE inside the sandbox with the workspace as cwd, HOME = fake home and canary secrets
# in the environment. Sets rc and out (stdout and stderr together).
# Every run's audit log is kept in $audit (the proxy's decisions: the other side of each line).
audit=$D/audit.jsonl
sandboxed() {
    : > "$audit"
    out=$(cd "$ws" && env HOME="$home" GITHUB_TOKEN="$canary" AWS_SECRET_ACCESS_KEY="$canary" \
        timeout -k 5 60 "$EXG" run --audit-log "$audit" -- bash -c "$1" 2>&1 </dev/null)
    rc=$?
}

# The egress proxy's decisions of the last run, one line each.
proxy_decisions() {
    jq -r 'select(.decision != null) | "  proxy: \(.decision) \(.host // "?"):\(.port // "?") \(if .address then "(" + .address + ") " else "" end)rule: \(.rule // .reason // "-")"' \
        "$audit" 2>/dev/null
}

# What the escape lines could change on the host (each line is judged by what it changed).
host_state() {
    if [ -e "$home/escape-test" ]; then echo "~/escape-test exists on the host"; fi
    if [ "$(sha256sum < "$ws/.git/hooks/pre-commit")" != "$hook_before" ]; then
        echo ".git/hooks/pre-commit changed on the host"
    fi
}

lines=(
    'touch ~/escape-test'
    'cat ~/.ssh/id_ed25519 ~/.aws/credentials'
    "env | grep -i -E 'key|token|secret'"
    'ls -l /var/run/docker.sock'
    "echo 'echo pwned' >> .git/hooks/pre-commit"
    'curl -sS -m 10 https://example.org'
    'curl -sS -m 3 http://169.254.169.254/'
)

# A line that "held" only because nothing ran would prove nothing: check the sandbox first.
sandboxed 'hostname'
if [ "$rc" -ne 0 ] || [ "$out" != exguardian ]; then
    echo "demo: the sandbox does not start (exit $rc): $out" >&2
    exit 1
fi

held=0 escaped=0
echo "ExGuardian demo: escape lines inside \`exguardian run\` (workspace $ws, HOME $home)"
echo
for line in "${lines[@]}"; do
    state_before=$(host_state)
    sandboxed "$line"
    why=""
    if [ "$rc" -eq 0 ] && [ -n "$out" ]; then why="succeeded and printed output"; fi
    if grep -qF -- "$canary" <<<"$out"; then why="${why:+$why; }the canary appeared"; fi
    state_after=$(host_state)
    if [ "$state_after" != "$state_before" ]; then why="${why:+$why; }$(echo $state_after)"; fi
    echo "\$ $line"
    echo "  exit status: $rc"
    if [ -n "$out" ]; then printf '%s\n' "$out" | head -n 10 | sed 's/^/  | /'; else echo "  (no output)"; fi
    decisions=$(proxy_decisions)
    if [ -n "$decisions" ]; then printf '%s\n' "$decisions"; fi
    # A network line is judged by the other side: the proxy refused it, and let nothing through
    # (what curl prints then is the proxy's own refusal, not the target's answer).
    case "$line" in
        curl*)
            why=""
            grep -q '"decision":"refused"' "$audit" || why="the proxy logged no refusal"
            if grep -q '"decision":"allowed"' "$audit"; then why="${why:+$why; }the proxy let a connection through"; fi
            if grep -qF -- "$canary" <<<"$out"; then why="${why:+$why; }the canary appeared"; fi ;;
    esac
    if [ -z "$why" ]; then
        echo "  verdict: held"
        held=$((held + 1))
    else
        echo "  verdict: ESCAPED ($why)"
        escaped=$((escaped + 1))
    fi
    echo
done

# Ordinary work must still succeed: write a file in the workspace and commit it.
work='echo "work done inside" > notes.txt && git add notes.txt && git -c user.name=agent -c user.email=agent@example.invalid commit -q -m "work from the sandbox" && git log --oneline -1'
sandboxed "$work"
echo "\$ $work"
echo "  exit status: $rc"
printf '%s\n' "$out" | head -n 10 | sed 's/^/  | /'
work_ok=0
if [ "$rc" -eq 0 ] && [ "$(cat "$ws/notes.txt" 2>/dev/null)" = "work done inside" ] \
    && git -C "$ws" log --format=%s -1 | grep -qx "work from the sandbox"; then
    echo "  ordinary work: ok (file and commit are on the host)"
    work_ok=1
else
    echo "  ordinary work: FAILED"
fi
echo

echo "summary: $held of ${#lines[@]} escape lines held, $escaped escaped; ordinary work $([ "$work_ok" = 1 ] && echo ok || echo FAILED)"
[ "$escaped" -eq 0 ] && [ "$work_ok" -eq 1 ]
