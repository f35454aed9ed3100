"""The programs outside cbf that its docs and tests run, each with the
Debian package it comes from and how a newcomer gets it, and the reading
of shell command lines shared by check_doc_commands.py (the docs' commands)
and check_test_programs.py (the tests' programs).

How a program is had:
  base     in every Debian 12 image (essential or required packages)
  setup    scripts/setup.sh installs it (its `debs` list)
  test     scripts/setup.sh installs it for the tests (`test_debs`, test.sh)
  first    the one thing needed before the set-up runs (the README says so)
  a text   neither: why not, and where it comes from (the CUDA toolkit, a
           cluster's Slurm); tests that need it skip without it
A program the docs or tests run that is not listed here fails both checks:
list it, and add its package to scripts/setup.sh when the set-up should
install it."""
import os
import re
import shlex

CUDA = "CUDA toolkit or NVIDIA driver: optional, only with a GPU (GPU tests skip without it)"
PROGRAMS = {
    # base: Debian 12's required packages
    **{p: ("coreutils", "base") for p in
       "basename cat chmod cp cut date dirname echo env false head id install ln ls mkdir mktemp mv "
       "nice nohup nproc printf readlink realpath rm seq sleep sort stat stdbuf tail tee test timeout touch tr true "
       "uname wc".split()},
    "sh": ("dash", "base"), "bash": ("bash", "base"), "grep": ("grep", "base"), "sed": ("sed", "base"),
    "awk": ("mawk", "base"), "find": ("findutils", "base"), "xargs": ("findutils", "base"),
    "diff": ("diffutils", "base"), "cmp": ("diffutils", "base"), "gzip": ("gzip", "base"),
    "tar": ("tar", "base"), "dpkg": ("dpkg", "base"), "dpkg-query": ("dpkg", "base"),
    "ldd": ("libc-bin", "base"), "apt-get": ("apt", "base"), "apt-cache": ("apt", "base"), "which": ("debianutils", "base"),
    # the set-up's (scripts/setup.sh debs)
    "git": ("git", "first"), "sudo": ("sudo", "first"),
    "meson": ("meson", "setup"), "ninja": ("ninja-build", "setup"), "pkg-config": ("pkg-config", "setup"),
    "make": ("build-essential", "setup"), "cc": ("build-essential", "setup"),
    "gcc": ("build-essential", "setup"), "clang": ("clang", "setup"), "python3": ("python3", "setup"),
    "h5dump": ("hdf5-tools", "setup"), "h5ls": ("hdf5-tools", "setup"),
    "curl": ("curl", "setup"), "nc": ("netcat-openbsd", "setup"),
    "ip": ("iproute2", "setup"), "ss": ("iproute2", "setup"), "bridge": ("iproute2", "setup"),
    "sysctl": ("procps", "setup"), "top": ("procps", "setup"), "ps": ("procps", "setup"),
    "systemd-analyze": ("systemd", "setup"), "systemctl": ("systemd", "setup"),
    "systemd-sysusers": ("systemd", "setup"),
    # the tests' (scripts/setup.sh test_debs)
    "mount": ("mount", "base"), "umount": ("mount", "base"), "h5clear": ("hdf5-tools", "setup"),
    "valgrind": ("valgrind", "test"), "shellcheck": ("shellcheck", "test"),
    # neither
    "nvcc": ("nvidia-cuda-toolkit", CUDA), "compute-sanitizer": ("nvidia-cuda-toolkit", CUDA),
    "ncu": ("nvidia-cuda-toolkit", CUDA), "nvidia-smi": ("nvidia-smi", CUDA),
    "perf": ("linux-perf", "profiling by hand (docs/network.md); apt-get install linux-perf"),
    "srun": ("slurm-client", "a Slurm cluster's (scripts/slurm/); tests/tools/check_slurm.sh uses a stand-in"),
    "sbatch": ("slurm-client", "a Slurm cluster's (scripts/slurm/)"),
}

# Shell keywords after which a command starts, and builtins (their words are arguments).
KEYWORDS = set("! { } [[ do done elif else esac fi if then until while".split())
BUILTINS = set("[ . : alias break cd continue declare eval exit export kill local read return set shift "
               "source trap type ulimit umask unset wait".split())
# Words that run the program that follows them (their own options skipped).
WRAPPERS = {"sudo", "timeout", "env", "nice", "nohup", "time", "exec", "command", "stdbuf"}
SHELL_WRAPPERS = {"time", "exec", "command"}
SEPARATORS = {"|", "||", "&", "&&", ";", ";;", "(", ")", "|&", "`"}


def setup_packages(src):
    """scripts/setup.sh's two lists: (debs, test_debs), each a set of names."""
    with open(os.path.join(src, "scripts", "setup.sh")) as f:
        text = f.read()
    lists = {}
    for name in ("debs", "test_debs"):
        words = set()
        for m in re.finditer(rf'^\s*{name}="([^"]*)"', text, re.M):
            words |= {w for w in m.group(1).split() if not w.startswith("$")}
        lists[name] = words
    return lists["debs"], lists["test_debs"]


def missing_from_setup(program, src, for_tests):
    """None when the set-up provides `program` as the table says; else why not."""
    if program not in PROGRAMS:
        return (f"'{program}' is not in tests/tools/programs.py's table: add it with its Debian "
                f"package (and the package to scripts/setup.sh if the set-up should install it)")
    pkg, how = PROGRAMS[program]
    debs, test_debs = setup_packages(src)
    if how == "setup" and pkg not in debs:
        return f"'{program}' comes from {pkg}, which scripts/setup.sh's debs list does not install"
    if how == "test" and not for_tests:
        return f"'{program}' ({pkg}) is installed for the tests only (test_debs), not by the set-up the docs use"
    if how == "test" and pkg not in test_debs | debs:
        return f"'{program}' comes from {pkg}, which scripts/setup.sh's test_debs list does not install"
    return None


def words(line):
    """Shell words and operators of one command line, comments dropped;
    None when it does not parse as shell."""
    lex = shlex.shlex(line, posix=True, punctuation_chars=True)
    lex.whitespace_split = True
    lex.commenters = "#"
    try:
        return list(lex)
    except ValueError:
        return None


def programs(line):
    """The programs a shell command line runs, in order (shell keywords
    and builtins left out, wrappers such as sudo or timeout looked
    through, variable assignments skipped)."""
    toks = words(re.sub(r"\$\{[^}]*\}|\$\(\([^)]*\)\)", "x", line))
    if toks is None:
        return []
    out, start, skip_segment = [], True, False
    i = 0
    while i < len(toks):
        t = toks[i]
        i += 1
        if re.fullmatch(r"[0-9]*(<|>|>>|<<|&>|>&|<&)", t) or (t.isdigit() and i < len(toks)
                                                             and toks[i].startswith((">", "<"))):
            if not t.isdigit() and i < len(toks) and not toks[i].startswith(("&", "-")):
                i += 1                                            # the file redirected to or from
            continue
        if t in SEPARATORS or re.fullmatch(r"[|&;()]+", t):
            start, skip_segment = True, False
            continue
        if not start or skip_segment:
            continue
        if re.fullmatch(r"[A-Za-z_][A-Za-z0-9_]*=.*", t):      # VAR=value before a command
            continue
        if t in ("for", "case", "function"):                       # for NAME in WORDS; do
            skip_segment = True
            continue
        if t in KEYWORDS:
            continue                                              # `do X`, `then X`: X is the command
        if t in BUILTINS:
            skip_segment = True
            continue
        if t in WRAPPERS:
            if t not in SHELL_WRAPPERS:
                out.append(t)
            # the wrapper's own options and, for timeout, its duration
            while i < len(toks) and (toks[i].startswith("-") or
                                     (t == "timeout" and re.fullmatch(r"[0-9.]+[smhd]?", toks[i])) or
                                     (t == "env" and "=" in toks[i])):
                opt = toks[i]
                i += 1
                if t == "timeout" and opt in ("-s", "--signal", "-k", "--kill-after"):
                    i += 1
            continue
        out.append(t)
        start = False
    return out


def joined_lines(lines):
    """Command lines with backslash continuations, and quotes open across
    lines, joined: (first line number, text)."""
    out, buf, first = [], "", None
    for n, line in lines:
        if first is None:
            first = n
        if line.rstrip().endswith("\\"):
            buf += line.rstrip()[:-1] + " "
            continue
        if words(buf + line) is None and not line.lstrip().startswith("#"):
            buf += line + "\n"                                   # a quote still open
            continue
        out.append((first, buf + line))
        buf, first = "", None
    if buf:
        out.append((first, buf))
    return out
