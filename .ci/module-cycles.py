#!/usr/bin/env python3
"""Fail when the modules of a crate depend on each other in a cycle.

The graph: one node per source file of the crate (test files and `#[cfg(test)] mod
tests` blocks left out); an edge a -> b when file a names a path `crate::...`,
`super::...`, `self::...` or `child::...` (a module it declares with `mod child;`) that
resolves to file b (in a `use` line or inline). A path
through a re-export of the crate root (`crate::Pool`) resolves to the file the root
re-exports it from. Strongly connected components of more than one file are cycles.

A cycle is allowed only when all its files sit in one folder given with --allow;
`--allow engine/*` allows a cycle inside any one folder below engine/ (an engine's own
parts may refer to each other: its pool state holds its per-thread parts and they
reach back for the shared state). Usage:

    module-cycles.py CRATE_SRC_DIR [--allow FOLDER | --allow FOLDER/*]...
"""
import os
import re
import sys


def strip_tests(text):
    # Cut `#[cfg(test)]` modules: from the attribute to the end of its braces.
    out = []
    i = 0
    pat = re.compile(r"#\[cfg\((?:test|all\(test[^)]*\))\)\]\s*(?:pub(?:\([^)]*\))?\s+)?mod\s+\w+\s*\{")
    while True:
        m = pat.search(text, i)
        if not m:
            out.append(text[i:])
            break
        out.append(text[i:m.start()])
        depth = 1
        j = m.end()
        while j < len(text) and depth:
            if text[j] == "{":
                depth += 1
            elif text[j] == "}":
                depth -= 1
            j += 1
        i = j
    return "".join(out)


def strip_comments(text):
    text = re.sub(r"/\*.*?\*/", "", text, flags=re.S)
    return re.sub(r"//[^\n]*", "", text)


def expand_use(tree):
    """`a::{b, c::{d, e}}` -> ['a::b', 'a::c::d', 'a::c::e']."""
    # `x as y` names x (the alias only renames it here); drop the alias before the
    # spaces, which would glue `x`, `as` and `y` into one segment.
    tree = re.sub(r"\s+as\s+\w+", "", tree)
    tree = re.sub(r"\s+", "", tree)
    def split_top(s):
        parts, depth, cur = [], 0, ""
        for ch in s:
            if ch == "{":
                depth += 1
            elif ch == "}":
                depth -= 1
            if ch == "," and depth == 0:
                parts.append(cur)
                cur = ""
            else:
                cur += ch
        if cur:
            parts.append(cur)
        return parts
    def go(s):
        b = s.find("{")
        if b < 0:
            return [s]
        prefix = s[:b]
        inner = s[b + 1:s.rfind("}")]
        res = []
        for p in split_top(inner):
            for q in go(p):
                res.append(prefix + q if q != "self" else prefix.rstrip(":"))
        return res
    return go(tree)


def module_files(src):
    files = {}
    for root, _, names in os.walk(src):
        for n in names:
            if not n.endswith(".rs"):
                continue
            path = os.path.join(root, n)
            rel = os.path.relpath(path, src)
            if n == "tests.rs" or n.endswith("_tests.rs") or "/tests/" in "/" + rel:
                continue
            parts = rel[:-3].split(os.sep)
            if parts[-1] in ("mod", "lib", "main"):
                parts = parts[:-1]
            files[tuple(parts)] = rel
    return files


def main():
    args = sys.argv[1:]
    src = args[0]
    allowed = [args[i + 1] for i, a in enumerate(args) if a == "--allow"]
    files = module_files(src)
    texts = {m: strip_comments(strip_tests(open(os.path.join(src, f)).read())) for m, f in files.items()}

    # Re-exports (`pub use` / `pub(crate) use`): a name a module re-exports resolves to
    # where it comes from, and the re-export itself is no dependency of the module.
    reexport_re = re.compile(r"\bpub(?:\([^)]*\))?\s+use\s+([^;]+);")

    def absolute(mod, segs):
        if segs[0] == "crate":
            return segs[1:]
        if segs[0] in ("super", "self"):
            base = list(mod)
            while segs and segs[0] == "super":
                base = base[:-1]
                segs = segs[1:]
            if segs and segs[0] == "self":
                segs = segs[1:]
            return base + segs
        if (mod + (segs[0],)) in files:
            return list(mod) + segs
        return None

    reexports = {m: {} for m in files}
    for mod, text in texts.items():
        for tree in reexport_re.findall(text):
            for p in expand_use(tree):
                segs = p.split("::")
                full = absolute(mod, segs)
                if full:
                    reexports[mod][full[-1]] = full

    def resolve(mod, segs, depth=0):
        # The longest prefix of segs that names a module file, following re-exports.
        for k in range(len(segs), -1, -1):
            if tuple(segs[:k]) in files:
                here = tuple(segs[:k])
                if k < len(segs) and segs[k] in reexports[here] and depth < 20:
                    target = reexports[here][segs[k]]
                    if target[: k + 1] != segs[: k + 1]:
                        return resolve(mod, target + segs[k + 1 :], depth + 1)
                return here
        return None

    child_re = re.compile(r"\bmod\s+(\w+)\s*;")
    bare_re = re.compile(r"(?<![\w:$])(\w+)((?:::\w+)+)")

    edges = {m: set() for m in files}
    for mod, text in texts.items():
        own = reexport_re.sub("", text)
        paths = []
        for tree in re.findall(r"\buse\s+([^;]+);", own):
            paths.extend(expand_use(tree))
        paths.extend(re.findall(r"\b((?:crate|super|self)(?:::\w+)+)", own))
        # A module names its child modules (`mod child;`) by their bare name:
        # `child::item` is `self::child::item`. Not after `::` (then `child` is a
        # segment of a longer path) nor after `$` (`$crate::`).
        children = {c for c in child_re.findall(own) if mod + (c,) in files}
        for first, rest in bare_re.findall(own):
            if first in children:
                paths.append("self::" + first + rest)
        for p in paths:
            full = absolute(mod, p.split("::"))
            if full is None:
                continue
            target = resolve(mod, full)
            if target is not None and target != mod and target in files:
                edges[mod].add(target)

    # Tarjan's strongly connected components.
    index, low, stack, on, comps = {}, {}, [], set(), []
    counter = [0]
    sys.setrecursionlimit(10000)
    def strong(v):
        index[v] = low[v] = counter[0]
        counter[0] += 1
        stack.append(v)
        on.add(v)
        for w in edges[v]:
            if w not in index:
                strong(w)
                low[v] = min(low[v], low[w])
            elif w in on:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            comp = []
            while True:
                w = stack.pop()
                on.discard(w)
                comp.append(w)
                if w == v:
                    break
            if len(comp) > 1:
                comps.append(sorted(comp))
    for v in sorted(files):
        if v not in index:
            strong(v)

    bad = 0
    for comp in comps:
        names = ["/".join(c) or "lib" for c in comp]
        inside = []
        for a in allowed:
            if a.endswith("/*"):
                # One folder below `a`, the same for every file of the cycle.
                parent = a[:-2] + "/"
                heads = {n[len(parent):].split("/")[0] for n in names if n.startswith(parent)}
                if len(heads) == 1 and all(n.startswith(parent) for n in names):
                    inside.append(parent + heads.pop())
            elif all(n.startswith(a + "/") or n == a for n in names):
                inside.append(a)
        if inside:
            print(f"cycle inside {inside[0]} (allowed): {' '.join(names)}")
        else:
            bad += 1
            print(f"CYCLE: {' '.join(names)}")
            for c in comp:
                outs = sorted("/".join(t) for t in edges[c] if t in comp)
                print(f"    {'/'.join(c) or 'lib'} -> {', '.join(outs)}")
    if bad:
        print(f"{src}: {bad} module cycle(s) outside the allowed folders")
        sys.exit(1)
    print(f"{src}: no module cycles outside the allowed folders")


main()
