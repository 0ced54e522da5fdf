#!/usr/bin/env python3
"""Times commands interleaved: every round runs each command once (in an order
that rotates from round to round), so that a change of the machine's load hits
every command alike, where hyperfine runs all of one command's runs, then the
next's. Writes hyperfine's JSON shape (results[].command/median/mean/stddev/
times/user/system, plus p90) so the benchmarks' reports read either.

Usage: interleave.py --runs N --warmup W --export-json FILE NAME COMMAND [NAME COMMAND ...]
A COMMAND is split like a shell word list (no shell runs it); its output goes
to /dev/null; a non-zero exit status stops the benchmark.

--whole-tree: a run ends when every process it started has exited, not only
the command, and CPU is that of all of them. This script becomes a child
subreaper, so that processes the command leaves behind come back to it and
are waited for. Without it, a tool whose first process exits without waiting
for its children (bwrap does not wait for its pid 1, which made the mounts and
ran the command) looked faster than it is and had only a fraction of its CPU
counted.
"""
import argparse
import ctypes
import json
import os
import shlex
import statistics
import sys
import time


PR_SET_CHILD_SUBREAPER = 36


def become_subreaper():
    libc = ctypes.CDLL(None, use_errno=True)
    if libc.prctl(PR_SET_CHILD_SUBREAPER, 1, 0, 0, 0) != 0:
        sys.exit(f"interleave.py: prctl(PR_SET_CHILD_SUBREAPER): {os.strerror(ctypes.get_errno())}")


def run_once(argv, whole_tree):
    t0 = time.perf_counter_ns()
    pid = os.posix_spawnp(argv[0], argv, os.environ,
                          file_actions=[(os.POSIX_SPAWN_OPEN, 0, "/dev/null", os.O_RDONLY, 0),
                                        (os.POSIX_SPAWN_OPEN, 1, "/dev/null", os.O_WRONLY, 0)])
    _, status, ru = os.wait4(pid, 0)
    utime, stime = ru.ru_utime, ru.ru_stime
    while whole_tree:  # what the command left behind came back to us (subreaper)
        try:
            _, _, ru = os.wait4(-1, 0)
        except ChildProcessError:
            break
        utime += ru.ru_utime
        stime += ru.ru_stime
    t1 = time.perf_counter_ns()
    return (t1 - t0) / 1e9, utime, stime, os.waitstatus_to_exitcode(status)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--runs", type=int, default=50)
    ap.add_argument("--warmup", type=int, default=3)
    ap.add_argument("--export-json", required=True)
    ap.add_argument("--whole-tree", action="store_true",
                    help="time and count every process a run starts, until the last has exited")
    ap.add_argument("pairs", nargs="+")
    a = ap.parse_args()
    if len(a.pairs) % 2:
        ap.error("NAME COMMAND pairs expected")
    if a.whole_tree:
        become_subreaper()
    cmds = [(a.pairs[i], shlex.split(a.pairs[i + 1]), a.pairs[i + 1]) for i in range(0, len(a.pairs), 2)]
    times = {name: [] for name, _, _ in cmds}
    user = {name: [] for name, _, _ in cmds}
    system = {name: [] for name, _, _ in cmds}
    for r in range(a.warmup + a.runs):
        k = r % len(cmds)
        for name, argv, _ in cmds[k:] + cmds[:k]:
            wall, u, s, code = run_once(argv, a.whole_tree)
            if code != 0:
                sys.exit(f"interleave.py: {name} exited with status {code}")
            if r >= a.warmup:
                times[name].append(wall)
                user[name].append(u)
                system[name].append(s)
    results = []
    for name, _, line in cmds:
        t = sorted(times[name])
        results.append({
            "command": name, "command_line": line,
            "median": statistics.median(t), "mean": statistics.mean(t),
            "stddev": statistics.stdev(t) if len(t) > 1 else 0.0,
            "p90": t[min(len(t) - 1, int(round(0.9 * (len(t) - 1))))],
            "min": t[0], "max": t[-1],
            "user": statistics.mean(user[name]), "system": statistics.mean(system[name]),
            "times": times[name],
        })
    json.dump({"interleaved": True, "whole_tree": a.whole_tree, "runs": a.runs, "results": results}, open(a.export_json, "w"), indent=1)


if __name__ == "__main__":
    main()
