#!/usr/bin/env python3
"""Holds the direction of includes between the rooms (the folders under src/).

    check_includes.py SOURCE_DIR      check SOURCE_DIR/src against SOURCE_DIR/docs/architecture.md
    check_includes.py --self-test     the check run on temporary trees (it must fail where it should)

The rules are read from docs/architecture.md itself (one source of truth): the
table under "## Which room may include which" (room | may include) and the one
under "### Exceptions" (from | to | why). A room is a folder under src/ that has
a row; a file belongs to the room of the longest row that is a folder above it
(microvm/guest is a room of its own inside microvm). A room may always include
itself. An include names a room when its first path components are one
("layer/kind.hpp"); others (system headers, generated files) are not checked.

Fails (exit 1), each with one line naming what and where, on:
  - an include into a room that its file's room may not include, unless an
    exception covers it (file:line, the include, and the rule broken);
  - an exception that covers no include any more (stale: remove its row, the
    list shrinks as the edges go);
  - a folder under src/ that holds sources but has no row, or a row whose folder
    is gone, or a rule naming a room that has no row.
An exception's "from" is a room or a file (path under src/); its "to" a room or
a header (path under src/); a room matches every file inside it.
"""

import os
import re
import sys
import tempfile

DOC = "docs/architecture.md"
RULES_HEADING = "## Which room may include which"
EXCEPTIONS_HEADING = "### Exceptions"
SOURCE_SUFFIXES = (".cpp", ".hpp", ".h", ".cc", ".inc", ".in")
INCLUDE = re.compile(r'^\s*#\s*include\s*([<"])([^">]+)[">]')


class DocError(Exception):
    pass


def table_after(lines, heading):
    """The rows (lists of cells) of the first markdown table after `heading`."""
    start = None
    for i, line in enumerate(lines):
        if line.strip() == heading:
            start = i + 1
            break
    if start is None:
        raise DocError(f"{DOC}: no heading '{heading}'")
    rows = []
    in_table = False
    for i in range(start, len(lines)):
        line = lines[i].strip()
        if line.startswith("#"):
            break
        if line.startswith("|"):
            in_table = True
            cells = [c.strip() for c in line.strip("|").split("|")]
            if all(re.fullmatch(r":?-+:?", c) for c in cells):
                continue
            rows.append((i + 1, cells))
        elif in_table:
            break
    if not rows:
        raise DocError(f"{DOC}: no table under '{heading}'")
    return rows[1:]  # (the header row)


def names(cell):
    """`layer`, `plan` ... -> ["layer", "plan"]; an em dash or nothing -> []."""
    return [n.strip().strip("`") for n in re.split(r"[,\s]+", cell) if n.strip().strip("`") not in ("", "—", "-")]


def read_rules(doc_text):
    lines = doc_text.splitlines()
    rules = {}
    for lineno, cells in table_after(lines, RULES_HEADING):
        if len(cells) < 2:
            raise DocError(f"{DOC}:{lineno}: a rule row is 'room | may include'")
        room = cells[0].strip("`")
        if room in rules:
            raise DocError(f"{DOC}:{lineno}: room {room} has two rows")
        rules[room] = (lineno, set(names(cells[1])))
    exceptions = []
    for lineno, cells in table_after(lines, EXCEPTIONS_HEADING):
        if len(cells) < 3 or not cells[0].strip("`") or not cells[1].strip("`") or not cells[2]:
            raise DocError(f"{DOC}:{lineno}: an exception row is 'from | to | why' (all three)")
        exceptions.append((lineno, cells[0].strip("`"), cells[1].strip("`")))
    return rules, exceptions


def room_of(path, rooms):
    """The room of a path under src/ (longest row that is a folder above it or it)."""
    best = None
    for r in rooms:
        if (path == r or path.startswith(r + "/")) and (best is None or len(r) > len(best)):
            best = r
    return best


def covers(pattern, path):
    return path == pattern or path.startswith(pattern + "/")


def check(root):
    """Problems found under root (each one line), [] when the tree holds to the table."""
    try:
        with open(os.path.join(root, DOC), encoding="utf-8") as f:
            rules, exceptions = read_rules(f.read())
    except (OSError, DocError) as e:
        return [str(e)]
    problems = []
    src = os.path.join(root, "src")
    for room, (lineno, allowed) in sorted(rules.items()):
        if not os.path.isdir(os.path.join(src, room)):
            problems.append(f"{DOC}:{lineno}: room {room} has a row but src/{room} is gone: remove the row")
        for a in sorted(allowed - set(rules)):
            problems.append(f"{DOC}:{lineno}: room {room} may include '{a}', which has no row")
    used = [0] * len(exceptions)
    for dirpath, dirnames, filenames in os.walk(src):
        dirnames.sort()
        for name in sorted(filenames):
            if not name.endswith(SOURCE_SUFFIXES):
                continue
            full = os.path.join(dirpath, name)
            path = os.path.relpath(full, src)
            room = room_of(path, rules)
            if room is None:
                problems.append(f"src/{path}: its folder has no row in {DOC} ('{RULES_HEADING}')")
                continue
            allowed = rules[room][1]
            with open(full, encoding="utf-8", errors="replace") as f:
                for n, line in enumerate(f, 1):
                    m = INCLUDE.match(line)
                    if not m:
                        continue
                    target = m.group(2).strip()
                    if target.startswith("."):  # "../layer/kind.hpp": the path from src/
                        target = os.path.normpath(os.path.join(os.path.dirname(path), target))
                    to_room = room_of(target, rules)
                    if to_room is None or to_room == room or to_room in allowed:
                        continue
                    hit = [i for i, (_, frm, to) in enumerate(exceptions) if covers(frm, path) and covers(to, target)]
                    if hit:
                        for i in hit:
                            used[i] += 1
                        continue
                    may = ", ".join(sorted(allowed)) or "nothing but itself"
                    problems.append(f"src/{path}:{n}: includes \"{target}\" ({to_room}), but {room} may include "
                                    f"{may} ({DOC}:{rules[room][0]}); move the code, or list the edge under "
                                    f"'{EXCEPTIONS_HEADING}' with its reason")
    for i, (lineno, frm, to) in enumerate(exceptions):
        if not used[i]:
            problems.append(f"{DOC}:{lineno}: exception {frm} -> {to} covers no include any more: remove its row")
    return problems


def main(argv):
    if len(argv) == 2 and argv[1] == "--self-test":
        return self_test()
    if len(argv) != 2:
        print(__doc__.strip().splitlines()[2].strip(), file=sys.stderr)
        return 2
    problems = check(argv[1])
    for p in problems:
        print(p, file=sys.stderr)
    if problems:
        print(f"check_includes: {len(problems)} problem(s) with the rooms' includes", file=sys.stderr)
        return 1
    print("check_includes: every include between the rooms follows " + DOC)
    return 0


# --- self-test: the check on small trees, each expected to pass or to fail with a given line ---

SELF_TEST_DOC = """# t

## Which room may include which

| room | may include |
|---|---|
| util | — |
| plan | util |
| layer | plan, util |
| layer/inner | util |

### Exceptions

| from | to | why |
|---|---|---|
{exceptions}
"""


def make_tree(base, files, exceptions=""):
    root = tempfile.mkdtemp(dir=base)
    os.makedirs(os.path.join(root, "docs"))
    with open(os.path.join(root, DOC), "w") as f:
        f.write(SELF_TEST_DOC.format(exceptions=exceptions))
    for path, text in files.items():
        full = os.path.join(root, "src", path)
        os.makedirs(os.path.dirname(full), exist_ok=True)
        with open(full, "w") as f:
            f.write(text)
    return root


def self_test():
    good = {
        "util/a.hpp": "#pragma once\n#include <vector>\n",
        "plan/p.hpp": '#include "util/a.hpp"\n#include "seccomp_bpf.inc"\n',
        "layer/l.cpp": '#include "plan/p.hpp"\n#include "layer/l.hpp"\n',
        "layer/l.hpp": "#pragma once\n",
        "layer/inner/i.cpp": '#include "util/a.hpp"\n',
    }
    back = dict(good, **{"plan/bad.cpp": '// why\n#include <cstdio>\n  #  include "layer/l.hpp"\n'})
    relative = dict(good, **{"plan/rel.cpp": '#include "../layer/l.hpp"\n'})
    nested = dict(good, **{"layer/inner/j.cpp": '#include "plan/p.hpp"\n'})
    cases = [
        ("a tree that follows the table passes", good, "", []),
        ("a back-edge fails, naming file:line and the rule", back, "",
         ['src/plan/bad.cpp:3: includes "layer/l.hpp" (layer), but plan may include util (docs/architecture.md:8)']),
        ("an exception covers the edge", back, "| plan/bad.cpp | layer | being moved |", []),
        ("a room-wide exception covers it too", back, "| plan | layer/l.hpp | being moved |", []),
        ("a stale exception fails", good, "| plan | layer | gone |",
         ["docs/architecture.md:16: exception plan -> layer covers no include any more"]),
        ("a relative path is followed to its room", relative, "",
         ['src/plan/rel.cpp:1: includes "layer/l.hpp" (layer), but plan may include util']),
        ("a nested room has its own row", nested, "",
         ['src/layer/inner/j.cpp:1: includes "plan/p.hpp" (plan), but layer/inner may include util']),
        ("a folder without a row fails", dict(good, **{"agent/x.cpp": "\n"}), "",
         ["src/agent/x.cpp: its folder has no row"]),
        ("a row without its folder fails", {k: v for k, v in good.items() if not k.startswith("plan/")}, "",
         ["room plan has a row but src/plan is gone"]),
        ("an exception without its reason fails", back, "| plan/bad.cpp | layer | |",
         ["an exception row is 'from | to | why'"]),
    ]
    failed = 0
    with tempfile.TemporaryDirectory() as base:
        for title, files, exc, expected in cases:
            problems = check(make_tree(base, files, exc))
            ok = (not expected and not problems) or (
                expected and len(problems) == len(expected)
                and all(any(e in p for p in problems) for e in expected))
            print(("ok    " if ok else "FAIL  ") + title)
            if not ok:
                failed += 1
                print("      expected: " + repr(expected) + "\n      got:      " + repr(problems))
    print(f"check_includes --self-test: {len(cases) - failed} of {len(cases)} cases as expected")
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
