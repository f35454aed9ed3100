#!/usr/bin/python3
"""Every program outside cbf that the tests run is one a newcomer has
after scripts/test.sh's set-up: in every Debian 12 image, or installed by
scripts/setup.sh (its debs, or test_debs for the tests), or marked in
programs.py with why not (the CUDA toolkit's; tests skip without it).

A static reading of the sources, so that a test which starts calling a
new program fails here rather than skipping quietly on a fresh machine:
  - Python (tests/, and scripts/ modules the tests import): the program of
    every subprocess call (run, Popen, check_output, check_call, call,
    asyncio's create_subprocess_exec) whose command is a list written in
    place or in a variable of the same file, and every shutil.which("X");
  - shell scripts (tests/, scripts/setup.sh and test.sh): every command
    of every line, and every `command -v X`;
  - C tests: the command strings handed to system() and popen()
    (written with snprintf into `cmd`);
  - tests' meson.build files: find_program('X') that is not a file there.
Programs of the project's own (a path, a build's tool, a test script) are
not counted.

Args: SOURCE_ROOT"""
import ast
import glob
import os
import re
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import programs as P  # noqa: E402

SUBPROCESS = {"run", "Popen", "check_output", "check_call", "call", "create_subprocess_exec"}
PROGRAM = re.compile(r"[a-z][a-z0-9_.+-]*")


def python_programs(path):
    with open(path) as f:
        tree = ast.parse(f.read(), path)
    lists = {}          # variable name -> first element of a list literal assigned to it
    for node in ast.walk(tree):
        if isinstance(node, ast.Assign) and isinstance(node.value, (ast.List, ast.Tuple)):
            first = node.value.elts[0] if node.value.elts else None
            if isinstance(first, ast.Constant) and isinstance(first.value, str):
                for t in node.targets:
                    if isinstance(t, ast.Name):
                        lists[t.id] = (first.value, node.lineno)
    found = []
    for node in ast.walk(tree):
        if not isinstance(node, ast.Call) or not node.args:
            continue
        f = node.func
        if not (isinstance(f, ast.Attribute) and isinstance(f.value, ast.Name)):
            continue
        module, name, arg = f.value.id, f.attr, node.args[0]
        if module in ("subprocess", "asyncio") and name in SUBPROCESS:
            if isinstance(arg, (ast.List, ast.Tuple)) and arg.elts and isinstance(arg.elts[0], ast.Constant):
                found.append((arg.elts[0].value, node.lineno))
            elif isinstance(arg, ast.Constant) and isinstance(arg.value, str):
                found.append((arg.value.split()[0] if node.keywords else arg.value, node.lineno))
            elif isinstance(arg, ast.Name) and arg.id in lists:
                found.append(lists[arg.id])
        elif module == "shutil" and name == "which" and isinstance(arg, ast.Constant) and isinstance(arg.value, str):
            found.append((arg.value, node.lineno))
    return [(p, n) for p, n in found if isinstance(p, str) and PROGRAM.fullmatch(p)]


def shell_programs(path):
    with open(path) as f:
        text = f.read()
    # The script's own functions are not programs.
    functions = set(re.findall(r"^\s*(?:function\s+)?([\w-]+)\s*\(\)", text, re.M))
    found, heredoc = [], None
    for n, line in P.joined_lines(list(enumerate(text.split("\n"), 1))):
        if heredoc:
            heredoc = None if line.strip() == heredoc else heredoc
            continue
        m = re.search(r"<<-?\s*['\"]?(\w+)['\"]?", line)
        if m:
            heredoc = m.group(1)
        for v in re.findall(r"command -v ([\w.+-]+)", line):
            found.append((v, n))
        # $(...) substitutions hold commands too; read them as lines of their own.
        line = re.sub(r"\$\(\([^)]*\)\)", "x", line)            # arithmetic, not a command
        for sub in re.findall(r"\$\(([^()]*)\)", line):
            found += [(p, n) for p in P.programs(sub)]
        found += [(p, n) for p in P.programs(re.sub(r"\$\([^()]*\)", "x", line))]
    return [(p, n) for p, n in found if PROGRAM.fullmatch(p) and p not in functions]


def c_programs(path):
    with open(path) as f:
        text = f.read()
    found = []
    for m in re.finditer(r'snprintf\(cmd, sizeof cmd, "([^"]*)"', text):
        n = text.count("\n", 0, m.start()) + 1
        found += [(p, n) for p in P.programs(m.group(1)) if PROGRAM.fullmatch(p)]
    return found


def meson_programs(path):
    here = os.path.dirname(path)
    with open(path) as f:
        text = f.read()
    return [(p, text.count("\n", 0, m.start()) + 1)
            for m in re.finditer(r"find_program\('([^']+)'", text)
            for p in [m.group(1)] if not os.path.exists(os.path.join(here, p))]


def main(src):
    files = sorted(glob.glob(f"{src}/tests/**/*", recursive=True))
    files += [f"{src}/scripts/{f}" for f in ("cbf_netns.py", "cbf_array.py", "setup.sh", "test.sh")]
    readers = {".py": python_programs, ".sh": shell_programs, ".c": c_programs}
    seen, bad, nfiles = {}, [], 0
    for path in files:
        name = os.path.basename(path)
        read = meson_programs if name == "meson.build" else readers.get(os.path.splitext(name)[1])
        if not read or not os.path.isfile(path):
            continue
        nfiles += 1
        for prog, n in read(path):
            if prog in P.PROGRAMS or prog not in seen:
                seen.setdefault(prog, f"{os.path.relpath(path, src)}:{n}")
    for prog, where in sorted(seen.items()):
        why = P.missing_from_setup(prog, src, for_tests=True)
        if why:
            bad.append(f"{where}: {why}")
    for b in bad:
        print("FAIL:", b)
    if not seen:
        print("FAIL: no programs found: is SOURCE_ROOT the source tree?")
        return 1
    if bad:
        return 1
    print(f"ok: the {len(seen)} programs {nfiles} test files run are in a base Debian 12 image, "
          f"installed by scripts/setup.sh, or marked why not: {', '.join(sorted(seen))}")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1]))
