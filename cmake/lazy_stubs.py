#!/usr/bin/env python3
"""Writes the assembly of exguardian's lazy-binding stubs for OpenSSL and zlib.

Why: loading and relocating libssl and libcrypto (about 4,000 symbol
relocations, bound at load time: Debian builds them with BIND_NOW) cost about
1.5 ms of CPU at every start of exguardian, most of what it spends before
main(), while a plain `exguardian run` never calls them (only TLS interception
for secrets and the service do). The libraries stay shared (Debian's security
fixes apply without a rebuild) but are not DT_NEEDED: every function of theirs
that exguardian's objects call gets a stub here, and the first call through any
stub (or util/lazy_libs.hpp's load_shared_libs(), called before the first use)
opens the libraries with dlopen() and binds every stub at once.

Usage: lazy_stubs.py --out FILE.cpp --lib PATH [--lib PATH ...] OBJECT_OR_ARCHIVE...
(the stubs are top-level assembly in a C++ file, so no ASM language is needed;
the binder is util/lazy_libs.cpp.)
The functions are found, not listed: every symbol the given objects leave
undefined and one of the libraries defines. A data symbol there is an error
(a stub can only stand for a function).
"""
import argparse
import os
import subprocess
import sys


def nm(args):
    out = subprocess.run(["nm", "-P"] + args, check=True, capture_output=True, text=True).stdout
    rows = []
    for line in out.splitlines():
        parts = line.split()
        if len(parts) >= 2 and not line.endswith(":"):
            rows.append((parts[0].split("@")[0], parts[1]))
    return rows


def check_binary(path, list_in):
    lazy = set(open(list_in).read().split())
    dyn = subprocess.run(["objdump", "-p", path], check=True, capture_output=True, text=True).stdout
    needed = {l.split()[1] for l in dyn.splitlines() if l.split()[:1] == ["NEEDED"]}
    still = sorted(needed & lazy)
    if still:
        os.remove(path)
        sys.exit(f"lazy_stubs.py: {path} still has {', '.join(still)} as DT_NEEDED (a function of theirs without a stub, "
                 "or the link lacks --as-needed): removed it")
    # Every other DT_NEEDED library is opened, mapped and relocated at every
    # start, and start-up is the product (libm alone cost about 0.4 ms): only
    # glibc itself, libc and its loader, may be one. A new dependency is linked
    # statically (CMakeLists.txt) or bound on first use (--lib above).
    other = sorted(n for n in needed - lazy if n != "libc.so.6" and not n.startswith("ld-linux"))
    if other:
        os.remove(path)
        sys.exit(f"lazy_stubs.py: {path} has {', '.join(other)} as DT_NEEDED: only libc.so.6 and its loader may be "
                 "(link it statically, or bind it on first use); removed it")


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--out")
    ap.add_argument("--check-binary", help="fail (and remove it) if this binary has a DT_NEEDED library other than libc and its loader, "
                    "one of --list-in's among them")
    ap.add_argument("--list-in")
    ap.add_argument("--lib", action="append", default=[], help="a shared library, in the order to search")
    ap.add_argument("--list-out", help="also write the libraries' sonames there, one a line (packaging/make-deb.sh)")
    ap.add_argument("objects", nargs="*")
    a = ap.parse_args()
    if a.check_binary:
        return check_binary(a.check_binary, a.list_in)
    if not a.out or not a.objects:
        ap.error("--out and objects are needed")

    undefined = set()
    defined_here = set()
    for name, kind in nm(a.objects):
        if kind == "U":
            undefined.add(name)
        else:
            defined_here.add(name)
    undefined -= defined_here

    libs = []  # (soname, {name: kind})
    for path in a.lib:
        dyn = subprocess.run(["objdump", "-p", path], check=True, capture_output=True, text=True).stdout
        sonames = [l.split()[1] for l in dyn.splitlines() if l.split()[:1] == ["SONAME"]]
        if not sonames:
            sys.exit(f"lazy_stubs.py: {path} has no SONAME")
        soname = sonames[0]
        syms = {}
        for name, kind in nm(["-D", "--defined-only", path]):
            syms.setdefault(name, kind)
        libs.append((soname, syms))

    stubs = []  # (name, lib index)
    for name in sorted(undefined):
        for i, (soname, syms) in enumerate(libs):
            if name in syms:
                if syms[name] not in ("T", "t", "W", "i"):
                    sys.exit(f"lazy_stubs.py: {name} in {soname} is data ({syms[name]}), not a function: it cannot be bound lazily")
                stubs.append((name, i))
                break

    s = []
    s.append(".pushsection .data")
    # The slots: each starts at its stub's binder, then holds the function.
    s.append("\t.data")
    s.append("\t.balign 8")
    s.append("\t.globl exg_lazy_slots")
    s.append("\t.hidden exg_lazy_slots")
    s.append("exg_lazy_slots:")
    for i, _ in enumerate(stubs):
        s.append(f"\t.quad .Lbind_{i}")
    s.append("\t.section .rodata")
    s.append("\t.globl exg_lazy_count")
    s.append("\t.hidden exg_lazy_count")
    s.append("\t.balign 4")
    s.append("exg_lazy_count:")
    s.append(f"\t.long {len(stubs)}")
    s.append("\t.globl exg_lazy_lib_of")
    s.append("\t.hidden exg_lazy_lib_of")
    s.append("exg_lazy_lib_of:")
    for _, lib in stubs:
        s.append(f"\t.byte {lib}")
    s.append("\t.globl exg_lazy_lib_count")
    s.append("\t.hidden exg_lazy_lib_count")
    s.append("\t.balign 4")
    s.append("exg_lazy_lib_count:")
    s.append(f"\t.long {len(libs)}")
    s.append("\t.section .data.rel.ro,\"aw\"")
    s.append("\t.balign 8")
    s.append("\t.globl exg_lazy_names")
    s.append("\t.hidden exg_lazy_names")
    s.append("exg_lazy_names:")
    for i, _ in enumerate(stubs):
        s.append(f"\t.quad .Lname_{i}")
    s.append("\t.globl exg_lazy_sonames")
    s.append("\t.hidden exg_lazy_sonames")
    s.append("exg_lazy_sonames:")
    for i, _ in enumerate(libs):
        s.append(f"\t.quad .Lsoname_{i}")
    s.append("\t.section .rodata.str1.1,\"aMS\",@progbits,1")
    for i, (name, _) in enumerate(stubs):
        s.append(f'.Lname_{i}:\t.asciz "{name}"')
    for i, (soname, _) in enumerate(libs):
        s.append(f'.Lsoname_{i}:\t.asciz "{soname}"')

    s.append("\t.text")
    for i, (name, _) in enumerate(stubs):
        s.append(f"\t.globl {name}")
        s.append(f"\t.hidden {name}")
        s.append(f"\t.type {name},@function")
        s.append(f"{name}:")
        s.append(f"\tjmp *exg_lazy_slots+{8 * i}(%rip)")
        s.append(f".Lbind_{i}:")
        s.append(f"\tmovl ${i}, %r11d")
        s.append("\tjmp exg_lazy_bind")
        s.append(f"\t.size {name}, .-{name}")
    # The binder: keeps every argument register (integer, vector, and %al for
    # varargs), asks exg_lazy_resolve(index) for the function, and jumps to it
    # as if it had been called directly.
    s.append("\t.type exg_lazy_bind,@function")
    s.append("exg_lazy_bind:")
    s.append("\tpushq %rbp")
    s.append("\tmovq %rsp, %rbp")
    for r in ("rdi", "rsi", "rdx", "rcx", "r8", "r9", "rax"):
        s.append(f"\tpushq %{r}")
    # 8 pushes since the call: %rsp is 16-aligned minus 8; 136 bytes align it.
    s.append("\tsubq $136, %rsp")
    for k in range(8):
        s.append(f"\tmovdqu %xmm{k}, {16 * k}(%rsp)")
    s.append("\tmovl %r11d, %edi")
    s.append("\tcall exg_lazy_resolve")
    s.append("\tmovq %rax, %r11")
    for k in range(8):
        s.append(f"\tmovdqu {16 * k}(%rsp), %xmm{k}")
    s.append("\taddq $136, %rsp")
    for r in ("rax", "r9", "r8", "rcx", "rdx", "rsi", "rdi"):
        s.append(f"\tpopq %{r}")
    s.append("\tpopq %rbp")
    s.append("\tjmp *%r11")
    s.append("\t.size exg_lazy_bind, .-exg_lazy_bind")
    s.append(".popsection")

    with open(a.out + ".tmp", "w") as f:
        f.write("// Generated by cmake/lazy_stubs.py: do not edit.\n")
        f.write('asm(R"EXGASM(\n' + "\n".join(s) + '\n)EXGASM");\n')
    os.replace(a.out + ".tmp", a.out)
    if a.list_out:
        with open(a.list_out + ".tmp", "w") as f:
            f.write("".join(soname + "\n" for soname, _ in libs))
        os.replace(a.list_out + ".tmp", a.list_out)
    print(f"lazy_stubs.py: {len(stubs)} functions of {', '.join(l[0] for l in libs)}")


if __name__ == "__main__":
    main()
