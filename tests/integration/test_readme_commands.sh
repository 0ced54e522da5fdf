#!/usr/bin/env bash
# The README's tour runs as printed (issue 40, 3). Every code block after an HTML comment
# `<!-- tested: step=STEP expect="TEXT" -->` is run, in the order of the README, by one bash (so a
# `cd` or a variable carries over to the next block, as in a reader's terminal), with the built
# exguardian first on PATH, in a throwaway directory (TMPDIR and HOME are the test's own). Each
# block must end with status 0 and print TEXT (stdout or stderr). The marked blocks must cover
# every step of the tour (run, policy, srt, layer, serve, mcp, runtime). Blocks that need the
# network (npm), a container engine or a long build are not marked. What keeps the tour off real
# addresses: the one egress attempt is refused by the proxy (deny by default, before any lookup),
# and serve listens on a Unix socket or a loopback address only (checked below).
source "$(dirname "$0")/lib.sh"
need_source_tree README.md curl jq python3

BLOCKS=$T/readme-blocks
mkdir -p "$BLOCKS"
python3 - "$SRC/README.md" "$BLOCKS" <<'PY' || { fail "the README's tested blocks could not be read"; finish; }
import re, sys, os
text = open(sys.argv[1]).read()
out = sys.argv[2]
marker = re.compile(r'<!-- tested: step=(\w+) expect="([^"]*)" -->\n```(?:sh|bash)\n(.*?)\n```', re.S)
n = 0
for m in marker.finditer(text):
    n += 1
    d = os.path.join(out, "%02d" % n)
    os.mkdir(d)
    open(os.path.join(d, "step"), "w").write(m.group(1) + "\n")
    open(os.path.join(d, "expect"), "w").write(m.group(2))
    open(os.path.join(d, "block.sh"), "w").write(m.group(3) + "\n")
# A marker not followed by a code block is a mistake in the README, not a block to leave out.
if text.count("<!-- tested:") != n:
    sys.exit("%d markers, %d blocks after them" % (text.count("<!-- tested:"), n))
PY

steps=$(sort -u "$BLOCKS"/*/step 2>/dev/null | tr '\n' ' ')
note "tested blocks: $(ls "$BLOCKS" | wc -l), steps: $steps"
for s in run policy srt layer serve mcp runtime; do
    check "the marked blocks cover the tour's step '$s'" grep -qx "$s" <(cat "$BLOCKS"/*/step)
done
check "serve listens only on a Unix socket or a loopback address" \
    bash -c "! grep -ho -- '--listen [^ ]*' '$BLOCKS'/*/block.sh | grep -vE -- '--listen \"?(unix:|127\\.0\\.0\\.1:|\\[::1\\]:|localhost:)'"
check "no block names a real address to reach but example.org, which the proxy refuses" \
    bash -c "! grep -hoE 'https?://[a-z0-9.-]+' '$BLOCKS'/*/block.sh | grep -vE '^https?://(localhost|127\\.0\\.0\\.1|example\\.org)$'"

# One bash runs every block in turn; each block's output and status are kept apart.
TOUR=$T/tour
mkdir -p "$TOUR" "$T/home"
{
    echo 'set -u'
    for d in "$BLOCKS"/*/; do
        d=${d%/}
        echo "{"
        cat "$d/block.sh"
        echo "} >'$d/out' 2>&1 </dev/null; echo \$? >'$d/status'"
    done
    # Whatever a block left running (serve, when its block failed midway) ends here.
    echo 'for j in $(jobs -p); do kill "$j" 2>/dev/null; done; wait'
} > "$T/tour.sh"
BIN=$(cd "$(dirname "$EXG")" && pwd)
(cd "$TOUR" && TMPDIR=$TOUR HOME=$T/home PATH="$BIN:$PATH" timeout 600 bash "$T/tour.sh") >"$T/tour.log" 2>&1
note "the tour's bash ended with $?"

for d in "$BLOCKS"/*/; do
    d=${d%/}
    step=$(cat "$d/step")
    expect=$(cat "$d/expect")
    first=$(grep -v '^#' "$d/block.sh" | head -1)
    st=$(cat "$d/status" 2>/dev/null || echo "not run")
    if [ "$step" = serve ] && [ "$EXG_AS" = user ] && grep -q 'serve: cgroup limits: cannot be enforced' "$d/out"; then
        # Fail closed, as the README says next to the block: this host (cgroup v1) gives an
        # ordinary user no cgroup to set the sandboxes' limits in.
        skip "README serve: as an ordinary user here the server refuses to start without cgroup limits (said in the README)"
        SERVE_SKIPPED=1
    elif [ "$st" = 0 ] && grep -qF -- "$expect" "$d/out"; then
        ok "README $step: '${first:0:70}' ... prints '$expect'"
    else
        fail "README $step: '${first:0:70}' ...: status $st, '$expect' not printed"
        sed 's/^/#      out: /' "$d/out" 2>/dev/null | head -20
    fi
done

# The refused egress did not leave the sandbox: the summary names the proxy's default deny.
run_block_out() { grep -l 'example.org' "$BLOCKS"/*/block.sh | head -1 | xargs dirname; }
d=$(run_block_out)
check "the tour's egress attempt was refused by default deny" grep -qF 'example.org x1 (default deny' "$d/out"
# The tour's sandboxes left nothing in HOME (its writes went to the throwaway layer).
check "HOME holds no file the tour's sandbox wrote" test ! -e "$T/home/from-the-sandbox"
# serve ended, and removed its sandboxes' state.
if [ "${SERVE_SKIPPED:-0}" = 1 ]; then finish; fi
log=$(find "$TOUR" -name serve.log -print -quit)
check "the tour's serve listened on its Unix socket in the throwaway directory (its log: $log)" \
    grep -q "listening on unix:$TOUR/" "${log:-/dev/null}"
sock=$(dirname "${log:-/nonexistent/x}")/serve.sock
check "serve stopped (its socket answers no more)" bash -c "! curl -s --max-time 5 --unix-socket '$sock' http://localhost/health"

finish
