#!/usr/bin/env python3
"""Check that the commands and paths the documents quote exist as written.

Usage: .ci/doc-commands.py [--pisces BIN] [--pisces-bench BIN] [FILE.md ...]

Documents (default): README.md, ARCHITECTURE.md, CONTRIBUTING.md, BENCHMARKS.md,
crates/*/README.md, docs/**/*.md. In each:

* every command of the two binaries (a line of a code block, or a code span;
  continuation lines of a code block that start with blanks and a `[` or `--` belong to
  the command above): `pisces ...` (the tool, also written `cargo run --release [-q]
  -p pisces-cli -- ...` or `target/release/pisces ...`) and `pisces-bench ...` (the
  benchmark, also written `cargo run --release [-q] [-p pisces-bench] -- ...`, the
  workspace's default member, or `target/release/pisces-bench ...`): its subcommand
  exists and every `--flag` it uses appears in `BINARY [SUBCOMMAND] --help`, the
  engines `--engine` / `--engines` name exist, and every key of
  `--engine-options ENGINE:KEY=VALUE` is a string of that engine's folder;
* every `cargo test ... -p CRATE --test NAME`: CRATE is a crate of the workspace and
  `crates/<dir>/tests/NAME.rs` or `NAME/main.rs` exists; every `--example NAME` of a
  `cargo run`/`cargo build` with `-p CRATE` is an example of CRATE;
* every relative link target (`[..](path)`) exists, relative to the document; every code
  span that looks like a repository path (its first component is an entry of the
  workspace root, e.g. `crates/...`, `docs/...`, `.ci/run`) exists there or beside the
  document (a crate's README naming its own `tests/...`). Paths with
  placeholders (`<name>`, `*`, `{`, `...`) and generated ones (`target/...`) are skipped.

The binaries are the release builds CI has already made (`target/release/pisces` and
`target/release/pisces-bench`), so this costs one `--help` per subcommand. Exit status 1 and one line per finding when
anything is wrong.
"""

import argparse
import glob
import json
import os
import re
import subprocess
import sys

ROOT = os.path.normpath(os.path.join(os.path.dirname(os.path.abspath(__file__)), ".."))

# Ways the documents spell the two binaries, and which binary each names: `cargo run`
# without `-p` runs the workspace's default member, the benchmark.
_ENV = r"^(?:\$\s+)?(?:[A-Z_]+=\S+\s+)*"
BINARY_PREFIXES = [
    (re.compile(_ENV + r"cargo run --release(?: -q)? -p pisces-cli(?: -q)? --(?:\s+|$)"), "pisces"),
    (re.compile(_ENV + r"cargo run --release(?: -q)?(?: -p pisces-bench)?(?: -q)? --(?:\s+|$)"),
     "pisces-bench"),
    (re.compile(_ENV + r"(?:\./)?target/release/pisces-bench(?:\s+|$)"), "pisces-bench"),
    (re.compile(_ENV + r"(?:\./)?target/release/pisces(?:\s+|$)"), "pisces"),
    (re.compile(_ENV + r"pisces-bench(?:\s+|$)"), "pisces-bench"),
    (re.compile(_ENV + r"pisces(?:\s+|$)"), "pisces"),
]


def documents(args):
    if args:
        return args
    pats = ["README.md", "ARCHITECTURE.md", "CONTRIBUTING.md", "BENCHMARKS.md",
            "crates/*/README.md", "docs/**/*.md"]
    out = []
    for p in pats:
        out += sorted(glob.glob(os.path.join(ROOT, p), recursive=True))
    return out


def crates():
    """Package name -> crate directory, for every crate of the workspace."""
    m = {}
    for toml in glob.glob(os.path.join(ROOT, "crates", "*", "Cargo.toml")) + \
            glob.glob(os.path.join(ROOT, "crates", "*", "*", "Cargo.toml")):
        with open(toml) as f:
            for line in f:
                g = re.match(r'\s*name\s*=\s*"([^"]+)"', line)
                if g:
                    m.setdefault(g.group(1), os.path.dirname(toml))
                    break
    return m


class Binary:
    """A binary's subcommands and the flags each accepts."""

    def __init__(self, name, binary):
        self.name = name
        self.binary = binary
        self.cache = {}
        top = self.help([])
        self.subcommands = set()
        section = False
        for line in top.splitlines():
            if line.startswith("Commands:"):
                section = True
                continue
            if section:
                g = re.match(r"^  (\S+)", line)
                if g:
                    self.subcommands.add(g.group(1))
                elif line and not line.startswith(" "):
                    section = False

    def help(self, sub):
        key = tuple(sub)
        if key not in self.cache:
            r = subprocess.run([self.binary] + sub + ["--help"], capture_output=True, text=True)
            self.cache[key] = r.stdout if r.returncode == 0 else None
        return self.cache[key]

    def flags(self, sub):
        h = self.help(sub)
        if h is None:
            return None
        return set(re.findall(r"(--[a-z0-9][a-z0-9-]*)", h)) | {"--help"}


def strip_comment(line):
    i = line.find(" #")
    return line if i < 0 else line[:i]


def binary_args(text):
    """(binary name, the words after it) if `text` runs one of the binaries, else None."""
    text = text.strip()
    for p, name in BINARY_PREFIXES:
        m = p.match(text)
        if m:
            return name, text[m.end():]
    return None


def prose_spans(lines):
    """(line number, code span) of every code span outside code blocks, a span that
    wraps over a line break included (the break read as a space), and (line number,
    link target) of every Markdown link, as two lists."""
    spans, links = [], []
    para = []  # (line number, text) of the paragraph being read
    in_block = False

    def flush():
        if not para:
            return
        text = ""
        starts = []
        for n, t in para:
            starts.append((len(text), n))
            text += t + " "

        def line_at(pos):
            return max(n for off, n in starts if off <= pos)

        for m in re.finditer(r"`([^`]+)`", text):
            spans.append((line_at(m.start()), m.group(1).strip()))
        for m in re.finditer(r"\]\(([^)\s]+)\)", text):
            links.append((line_at(m.start()), m.group(1)))
        para.clear()

    for n, raw in enumerate(lines, 1):
        if raw.strip().startswith("```"):
            flush()
            in_block = not in_block
            continue
        if in_block:
            continue
        if not raw.strip():
            flush()
            continue
        para.append((n, raw.strip()))
    flush()
    return spans, links


def commands(path):
    """(line number, command text, in_block) of every command the document quotes."""
    out = []
    in_block = False
    lang_ok = True
    with open(path) as f:
        lines = f.read().split("\n")
    for n, raw in enumerate(lines, 1):
        s = raw.strip()
        if s.startswith("```"):
            if not in_block:
                lang = s[3:].strip()
                lang_ok = lang in ("", "sh", "bash", "shell", "console", "text")
            in_block = not in_block
            continue
        if in_block:
            if not lang_ok:
                continue
            line = strip_comment(raw)
            if re.match(r"^\s+(\[|--)", line) and out and out[-1][2] and out[-1][0] == "cont":
                # A continuation of the command above.
                out[-1] = ("cont", out[-1][1] + " " + line.strip(), True, out[-1][3])
                continue
            if binary_args(line) is not None or line.strip().startswith("cargo "):
                out.append(("cont", line.strip(), True, n))
            else:
                out.append(("other", "", False, n))
    spans, _ = prose_spans(lines)
    for n, span in spans:
        if binary_args(span) is not None or span.startswith("cargo "):
            out.append(("span", span, False, n))
    out.sort(key=lambda c: c[3])
    return [(n, text) for kind, text, _, n in out if kind != "other"]


def check_binary(binary, words, where, findings):
    toks = words.split()
    if not toks:
        return
    sub = []
    name = binary.name
    if toks[0] == "help":
        if len(toks) > 1 and toks[1] not in binary.subcommands and not toks[1].isupper():
            findings.append(f"{where}: `{name} help {toks[1]}`: no such subcommand")
        return
    if not toks[0].startswith("-"):
        # A hidden subcommand is not listed but answers `--help`.
        if toks[0] not in binary.subcommands and re.fullmatch(r"[a-z][a-z-]*", toks[0]) \
                and binary.help([toks[0]]) is not None:
            binary.subcommands.add(toks[0])
        if toks[0] not in binary.subcommands:
            # A binary's name followed by prose ("pisces engine", ...) is not a command.
            if re.fullmatch(r"[a-z][a-z-]*", toks[0]) and len(toks) > 1 and \
                    (toks[1].startswith("-") or toks[1].isupper() or "/" in toks[1]):
                findings.append(f"{where}: `{name} {toks[0]}`: no such subcommand")
            return
        sub = [toks[0]]
    check_engines(toks, where, findings)
    accepted = binary.flags(sub)
    if accepted is None:
        findings.append(f"{where}: `{' '.join([name] + sub)} --help` failed")
        return
    for t in toks:
        for flag in re.findall(r"(?:^|[\[|(])(--[a-z0-9][a-z0-9-]*)", t):
            if flag not in accepted:
                findings.append(f"{where}: `{' '.join([name] + sub)}` does not accept {flag}")


def engine_names():
    """The engines of the registry (their folders, and `volatile`, defined in pisces')
    and the bench's key-value peers."""
    d = os.path.join(ROOT, "crates", "pisces", "src", "engine")
    names = {n for n in os.listdir(d) if os.path.isfile(os.path.join(d, n, "mod.rs")) and n != "kit"}
    return names | {"volatile", "redb", "lmdb", "canopydb"}


def engine_option_keys(engine):
    """Every string literal of the engine's folder: the option keys are among them."""
    folder = "pisces" if engine == "volatile" else engine
    keys = set()
    for f in glob.glob(os.path.join(ROOT, "crates", "pisces", "src", "engine", folder, "**", "*.rs"),
                       recursive=True):
        with open(f) as fh:
            keys |= set(re.findall(r'"([a-z_]+)"', fh.read()))
    return keys


def check_engines(toks, where, findings):
    """`--engine E`, `--engines A,B` and `--engine-options E:K=V,...` name engines and
    option keys that exist (placeholders in capitals are skipped)."""
    known = engine_names()
    for i, t in enumerate(toks[:-1]):
        v = toks[i + 1].strip("[]|")
        if t in ("--engine", "--engines"):
            for e in v.split(","):
                if e and e.islower() and re.fullmatch(r"[a-z0-9-]+", e) and e not in known:
                    findings.append(f"{where}: {t} {v}: no engine {e}")
        if t == "--engine-options" and ":" in v:
            e, opts = v.split(":", 1)
            if not e.islower():
                continue
            if e not in known:
                findings.append(f"{where}: --engine-options {v}: no engine {e}")
                continue
            keys = engine_option_keys(e)
            for kv in opts.split(","):
                k = kv.split("=")[0]
                if k.islower() and k not in keys:
                    findings.append(f"{where}: --engine-options {v}: engine {e} has no option {k}")


# cargo test options that take a value.
CARGO_VALUE_FLAGS = {"-p", "--package", "--test", "--features", "--target-dir", "--example",
                     "--bin", "-j", "--jobs", "--manifest-path", "--profile"}


class TestNames:
    """The test names of a crate's test target, listed by the test executable that
    `cargo test --workspace --release` built (`--list`). The executables are found
    through `cargo test --workspace --release --no-run --message-format=json`, the
    same selection and features as CI's test build, so listing builds nothing new
    (a `cargo test -p CRATE` would resolve the crate's features alone and rebuild)."""

    def __init__(self):
        self.cache = {}
        self.executables = None

    def find_executables(self):
        """(package name, "lib" | test target name) -> test executable."""
        if self.executables is None:
            self.executables = {}
            r = subprocess.run(["cargo", "test", "-q", "--workspace", "--release", "--no-run",
                                "--message-format=json"],
                               capture_output=True, text=True, cwd=ROOT)
            for line in r.stdout.splitlines():
                try:
                    msg = json.loads(line)
                except ValueError:
                    continue
                if msg.get("reason") != "compiler-artifact" or not msg.get("executable"):
                    continue
                if not msg.get("profile", {}).get("test"):
                    continue
                pkg = msg["package_id"]
                name = msg["target"]["name"]
                kinds = msg["target"]["kind"]
                crate = self.package_name(pkg)
                key = (crate, "lib") if "lib" in kinds or "rlib" in kinds else (crate, name)
                self.executables[key] = msg["executable"]
        return self.executables

    @staticmethod
    def package_name(package_id):
        # `path+file:///.../crates/pisces-cli#0.1.0` (cargo >= 1.77) or
        # `pisces-cli 0.1.0 (path+file://...)`; a path id ending in the crate's dir name
        # carries no name when the dir name differs, so read it from the manifest.
        if " " in package_id:
            return package_id.split(" ")[0]
        path = package_id.split("#")[0].replace("path+file://", "")
        frag = package_id.split("#")[-1]
        if "@" in frag:
            return frag.split("@")[0]
        with open(os.path.join(path, "Cargo.toml")) as f:
            return re.search(r'^name\s*=\s*"([^"]+)"', f.read(), re.M).group(1)

    def names(self, crate, target):
        key = (crate, tuple(target))
        if key not in self.cache:
            which = "lib" if target == ["--lib"] else target[1]
            exe = self.find_executables().get((crate, which))
            if exe is None:
                self.cache[key] = None
            else:
                r = subprocess.run([exe, "--list"], capture_output=True, text=True, cwd=ROOT)
                self.cache[key] = None if r.returncode != 0 else [
                    l[:-len(": test")] for l in r.stdout.splitlines() if l.endswith(": test")]
        return self.cache[key]


def check_filter(cmd, toks, pkgs, tests, where, findings):
    """The name filter of `cargo test -p X (--test Y | --lib) FILTER` matches a test."""
    if tests is None or "--features" in toks or len(pkgs) != 1:
        return
    target, filt, i = [], None, 2
    while i < len(toks):
        t = toks[i]
        if t in ("--test",):
            target += [t, toks[i + 1]] if i + 1 < len(toks) else []
        if t == "--lib":
            target.append(t)
        if t in CARGO_VALUE_FLAGS:
            i += 2
            continue
        if not t.startswith("-") and filt is None:
            filt = t
        i += 1
    if filt is None or not target or target.count("--test") > 1:
        return
    names = tests.names(pkgs[0], target)
    if names is None:
        findings.append(f"{where}: `{cmd}`: cannot list the tests of {pkgs[0]} {' '.join(target)}")
    elif not any(filt in n for n in names):
        findings.append(f"{where}: `{cmd}`: no test of {pkgs[0]} {' '.join(target)} matches {filt}")


def check_cargo(cmd, crate_dirs, where, findings, tests=None):
    toks = cmd.split()
    if len(toks) < 2:
        return
    # Only the cargo arguments, not those after `--` (the program's).
    if "--" in toks:
        toks = toks[:toks.index("--")]
    pkgs = [toks[i + 1] for i, t in enumerate(toks[:-1]) if t in ("-p", "--package")]
    if any(p.isupper() for p in pkgs):
        return  # a placeholder (`-p CRATE`)
    for p in pkgs:
        if p not in crate_dirs:
            findings.append(f"{where}: `{cmd}`: no crate {p} in the workspace")
            return
    if toks[1] == "test":
        for i, t in enumerate(toks[:-1]):
            if t == "--test":
                name = toks[i + 1]
                if not pkgs:
                    findings.append(f"{where}: `{cmd}`: --test {name} without -p CRATE")
                    continue
                d = crate_dirs[pkgs[0]]
                if not (os.path.isfile(os.path.join(d, "tests", name + ".rs"))
                        or os.path.isfile(os.path.join(d, "tests", name, "main.rs"))):
                    findings.append(f"{where}: `{cmd}`: crate {pkgs[0]} has no test target {name}")
                    return
        check_filter(cmd, toks, pkgs, tests, where, findings)
    if toks[1] in ("run", "build", "test") and "--example" in toks and pkgs:
        name = toks[toks.index("--example") + 1]
        d = crate_dirs[pkgs[0]]
        with open(os.path.join(d, "Cargo.toml")) as f:
            declared = re.findall(r'\[\[example\]\]\s*name\s*=\s*"([^"]+)"', f.read())
        if name not in declared and not os.path.isfile(os.path.join(d, "examples", name + ".rs")):
            findings.append(f"{where}: `{cmd}`: crate {pkgs[0]} has no example {name}")


def check_paths(path, findings):
    top = set(os.listdir(ROOT)) - {"target"}
    base = os.path.dirname(path)
    rel = os.path.relpath(path, ROOT)
    with open(path) as f:
        lines = f.read().split("\n")
    spans, links = prose_spans(lines)
    for n, target in links:
        if re.match(r"^[a-z]+:", target) or target.startswith("#"):
            continue
        t = target.split("#")[0]
        if t and not os.path.exists(os.path.normpath(os.path.join(base, t))):
            findings.append(f"{rel}:{n}: link to {target}: no such file")
    for n, span in spans:
        span = span.rstrip(".,;:")
        if " " in span or any(c in span for c in "<>*{}$") or "..." in span \
                or span.startswith("target/"):
            continue
        first = span.split("/")[0]
        if "/" not in span and not span.endswith(".md"):
            continue
        if first not in top or first in (".", ".."):
            continue
        # From the repository's root, or (a crate's own document naming `tests/...`,
        # `src/...`) from the document's folder.
        p = span.split("#")[0].split(":")[0]
        if not any(os.path.exists(os.path.join(d, p)) for d in (ROOT, base)):
            findings.append(f"{rel}:{n}: `{span}`: no such path")


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--pisces", default=os.path.join(ROOT, "target", "release", "pisces"))
    ap.add_argument("--pisces-bench",
                    default=os.path.join(ROOT, "target", "release", "pisces-bench"))
    ap.add_argument("--list", action="store_true", help="print every command checked")
    ap.add_argument("--test-names", action="store_true",
                    help="also check each `cargo test ... FILTER` against the names "
                         "the workspace's release test executables list (`--list`; needs "
                         "them built; commands with --features are left out)")
    ap.add_argument("files", nargs="*")
    a = ap.parse_args()
    binaries = {}
    for name, path in (("pisces", a.pisces), ("pisces-bench", a.pisces_bench)):
        if not os.access(path, os.X_OK):
            print(f"doc-commands: no {name} binary at {path} (build it first: cargo build "
                  f"--release -p pisces-cli -p pisces-bench)", file=sys.stderr)
            return 2
        binaries[name] = Binary(name, path)
    crate_dirs = crates()
    tests = TestNames() if a.test_names else None
    findings = []
    docs = documents(a.files)
    n_cmds = 0
    for d in docs:
        rel = os.path.relpath(d, ROOT)
        for n, cmd in commands(d):
            where = f"{rel}:{n}"
            if a.list:
                print(f"{where}: {cmd}")
            run = binary_args(cmd)
            if run is not None:
                n_cmds += 1
                check_binary(binaries[run[0]], run[1], where, findings)
            elif cmd.startswith("cargo "):
                n_cmds += 1
                check_cargo(cmd, crate_dirs, where, findings, tests)
        check_paths(d, findings)
    for f in findings:
        print(f)
    print(f"doc-commands: {len(docs)} documents, {n_cmds} commands, "
          f"{len(findings)} finding(s)")
    return 1 if findings else 0


if __name__ == "__main__":
    sys.exit(main())
