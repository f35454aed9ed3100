#!/usr/bin/python3
"""Every command the README, docs/*.md and the plugins' READMEs give runs
as written from the source tree after the quick start (scripts/setup.sh,
which builds ./build; BUILD_ROOT stands in for ./build here).

Commands are the lines of ```sh (bash, shell, console) blocks, or only
their `$ ` lines where a block shows a session with output; and in other
blocks (unlabelled, text, indented) the lines that start with `$ `, with
a program of cbf's, a path into build/ or scripts/, sudo, or VAR=value.
Of each such line, every program it runs (through pipes, `&&`, loops,
sudo and timeout):
  - a path (build/tools/cbf-run, scripts/cbf-plot) exists there and is
    executable; the tree's paths among its arguments (pipelines/...) exist;
  - a cbf program by bare name (cbf-run) is refused: from the source tree
    it is build/tools/cbf-run, and the line is written with the path;
  - any other program is listed in programs.py with a Debian package that
    scripts/setup.sh installs or that every Debian 12 image has (or a
    reason it is neither: the CUDA toolkit's, Slurm's).
In running text, a code span that starts with a cbf program's bare name
(`cbf-bench feng --channels 4096`) is a name the README tells how to use:
`meson devenv -C build` opens a shell with the build's programs and
scripts/ on PATH, so the README must say that and the program must be on
that PATH; a span starting with build/ or scripts/ names a path that must
exist.

docs/example-plugin/README.md is left out: its commands run in that
folder against an installed cbf (tests/example/run_example.sh runs them);
so is docs/notes/, a record of past runs on other machines.

Args: SOURCE_ROOT BUILD_ROOT"""
import glob
import os
import re
import shutil
import subprocess
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import programs as P  # noqa: E402

SHELL_LANGS = {"sh", "bash", "shell", "console"}
# The tree's folders whose paths, as command arguments, must exist.
TREE = ("pipelines/", "scripts/", "docs/", "tests/", "plugins/", "systemd/", "dev/")
DEVENV = "meson devenv -C build"


def markdown(path):
    """(kind, lang, [(line number, text)]) for each code block, kind
    'fenced' or 'indented', and ('prose', None, lines) for each paragraph."""
    with open(path) as f:
        lines = f.read().split("\n")
    out, i, para = [], 0, []

    def flush():
        if para:
            out.append(("prose", None, list(para)))
            para.clear()

    prev_text = ""        # the last non-blank line outside code, to tell a list's continuation
    while i < len(lines):
        line = lines[i]
        m = re.match(r"\s*```(\S*)", line)
        if m:
            flush()
            lang, body = m.group(1).lower(), []
            i += 1
            while i < len(lines) and not re.match(r"\s*```", lines[i]):
                body.append((i + 1, lines[i]))
                i += 1
            out.append(("fenced", lang, body))
            i += 1
            continue
        in_list = re.match(r"\s*([-*+]|\d+\.)\s", prev_text) or prev_text.startswith("  ")
        if re.match(r"(    |\t)", line) and i > 0 and not lines[i - 1].strip() and not in_list:
            flush()
            body = []
            while i < len(lines) and (re.match(r"(    |\t)", lines[i]) or not lines[i].strip()):
                if lines[i].strip():
                    body.append((i + 1, lines[i].strip()))
                i += 1
            out.append(("indented", "", body))
            continue
        if line.strip():
            para.append((i + 1, line))
            prev_text = line
        else:
            flush()
        i += 1
    flush()
    return out


class Checker:
    def __init__(self, src, build):
        self.src, self.build = src, build
        self.bad, self.commands, self.spans = [], 0, 0
        self.ours = self._our_programs()
        self._devenv_path = None

    def _our_programs(self):
        """cbf's programs by name: what the build makes under tools/ and the
        executable scripts, each with its path from the source tree."""
        ours = {}
        for d, dirs, files in os.walk(os.path.join(self.build, "tools")):
            dirs[:] = [x for x in dirs if not x.endswith(".p")]
            for f in files:
                p = os.path.join(d, f)
                if os.access(p, os.X_OK) and "." not in f:
                    ours[f] = "build/" + os.path.relpath(p, self.build)
        for p in sorted(glob.glob(os.path.join(self.src, "scripts", "*"))):
            if os.path.isfile(p) and os.access(p, os.X_OK):
                ours.setdefault(os.path.basename(p), os.path.relpath(p, self.src))
        return ours

    def is_ours(self, name):
        return name in self.ours or re.fullmatch(r"cbf-[a-z-]+", name) is not None

    def resolve(self, path):
        path = path[2:] if path.startswith("./") else path
        if path == "build" or path.startswith("build/"):
            return os.path.join(self.build, path[len("build/"):])
        return os.path.join(self.src, path)

    def devenv_path(self):
        if self._devenv_path is None:
            meson = shutil.which("meson")
            r = subprocess.run([meson, "devenv", "-C", self.build, "env"], capture_output=True,
                               text=True, timeout=60) if meson else None
            if not r or r.returncode:
                self.bad.append(f"{DEVENV} (with {self.build}) failed: {r.stderr if r else 'no meson on PATH'}")
                self._devenv_path = ""
            else:
                self._devenv_path = next((l[5:] for l in r.stdout.splitlines() if l.startswith("PATH=")), "")
        return self._devenv_path

    def command(self, where, line):
        self.commands += 1
        toks = P.words(line) or []
        for prog in P.programs(line):
            if prog.startswith(("$", "~")):
                continue          # a path through a variable ($HOME/cbf/bin/cbf-run): the reader's
            if "/" in prog:
                exe = self.resolve(prog)
                if not (os.path.isfile(exe) and os.access(exe, os.X_OK)):
                    name = os.path.basename(prog)
                    hint = f" (it is {self.ours[name]})" if name in self.ours else ""
                    self.bad.append(f"{where}: `{prog}` is not a program there{hint}: {line.strip()}")
            elif self.is_ours(prog):
                hint = f"write {self.ours[prog]}" if prog in self.ours else "no such program of cbf's"
                self.bad.append(f"{where}: bare `{prog}` does not run from the source tree ({hint}): "
                                f"{line.strip()}")
            else:
                why = P.missing_from_setup(prog, self.src, for_tests=False)
                if why:
                    self.bad.append(f"{where}: {why}: {line.strip()}")
        for t in toks:
            if t.startswith(TREE) and not re.search(r"[A-Z*$<>{}\[\]]", t) and \
                    not os.path.exists(os.path.join(self.src, t)):
                self.bad.append(f"{where}: `{t}` is not in the source tree: {line.strip()}")

    def block(self, rel, kind, lang, body):
        if kind == "fenced" and lang not in SHELL_LANGS | {"", "text"}:
            return
        prompted = any(t.lstrip().startswith("$ ") for _, t in body)
        for n, text in P.joined_lines(body):
            s = text.strip()
            if s.startswith("$ "):
                self.command(f"{rel}:{n}", s[2:])
            elif kind == "fenced" and lang in SHELL_LANGS and not prompted:
                if s and not s.startswith("#"):
                    self.command(f"{rel}:{n}", s)
            else:
                first = s.split(" ", 1)[0] if s else ""
                if first == "sudo" or self.is_ours(first) or first.startswith(("build/", "scripts/", "./")) \
                        or re.fullmatch(r"[A-Z_][A-Z0-9_]*=\S*", first):
                    self.command(f"{rel}:{n}", s)

    def prose(self, rel, lines):
        text = "\n".join(t for _, t in lines)
        for m in re.finditer(r"`([^`]+)`", text):
            span = m.group(1).replace("\n", " ").strip()
            span = span[2:] if span.startswith("$ ") else span
            n = lines[0][0] + text.count("\n", 0, m.start())
            first = span.split(" ", 1)[0]
            if self.is_ours(first) and " " in span:
                self.spans += 1
                if not shutil.which(first, path=self.devenv_path()):
                    self.bad.append(f"{rel}:{n}: `{span}`: {first} is not on the PATH of {DEVENV}")
                self.named_bare = True
            elif first.startswith(("build/", "scripts/", "./scripts/")):
                self.spans += 1
                if not os.path.exists(self.resolve(first.rstrip("/"))):
                    self.bad.append(f"{rel}:{n}: `{span}`: {first} does not exist (after the build)")

    def run(self):
        self.named_bare = False
        files = ["README.md"] + sorted(glob.glob("docs/*.md", root_dir=self.src)) + \
            sorted(glob.glob("plugins/*/README.md", root_dir=self.src))
        for rel in files:
            for kind, lang, body in markdown(os.path.join(self.src, rel)):
                if kind == "prose":
                    self.prose(rel, body)
                else:
                    self.block(rel, kind, lang, body)
        with open(os.path.join(self.src, "README.md")) as f:
            if self.named_bare and DEVENV not in f.read():
                self.bad.append(f"README.md: the docs name programs bare (`cbf-bench feng`) and the README "
                                f"does not say `{DEVENV}` puts them on PATH")
        return files


def main(src, build):
    c = Checker(src, build)
    files = c.run()
    for b in c.bad:
        print("FAIL:", b)
    if c.commands == 0:
        print("FAIL: no commands found: is SOURCE_ROOT the source tree?")
        return 1
    if c.bad:
        return 1
    print(f"ok: {c.commands} command lines and {c.spans} named commands in {len(files)} files "
          f"run as written from the source tree")
    return 0


if __name__ == "__main__":
    sys.exit(main(*sys.argv[1:3]))
