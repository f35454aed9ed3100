#!/usr/bin/python3
"""Which Debian packages the lent GPU machine's library bundle (.devdeps) must
carry, and whether a bundle covers every library a build links.

The GPU machine is a bare Debian/Ubuntu image with CUDA: it has the Essential
packages and apt, with everything they depend on, and nothing of ours. So the
bundle carries the whole dependency closure of the libraries cbf links, less
that base. Both closures are read from this machine's apt lists (Depends and
Pre-Depends, the first of each set of alternatives), so no list here goes
stale when a library gains a dependency (libpcap's libdbus-1-3 did).

  devdeps.py list                   packages the bundle carries (one a line)
  devdeps.py check BUILD [--bundle DIR] [--drop PKG]...
      every shared library the ELF files under BUILD need, transitively (ldd),
      must come from the build itself, CUDA, the base, or the bundle: from the
      packages `list` names, or with --bundle, as a file in the unpacked DIR.
      --drop leaves a package out of the bundle (the test shows the check
      fails then). Exit 1 naming each library not covered.
  devdeps.py features BUILD         the optional features BUILD linked in
"""
import json
import os
import re
import shutil
import subprocess
import sys

# Runtime libraries cbf links (meson.build, net/): the roots of the closure.
ROOTS = ["libyaml-0-2", "libcmocka0", "libfftw3-single3", "libhdf5-103-1",
         "libhdf5-hl-100", "libzmq5", "libjansson4", "libpcap0.8",
         "libmicrohttpd12", "libibverbs1"]
DEP_KINDS = ("Depends", "PreDepends")
ARCH_LIB = "usr/lib/x86_64-linux-gnu"

# pkg-config names meson.build asks for with no fallback: each must resolve
# from the bundle alone, else meson builds the feature out (libpcap did, for
# want of dbus-1.pc). libzmq and libmicrohttpd fall back to find_library.
PKGCONFIG = ["yaml-0.1", "hdf5", "fftw3f", "jansson", "cmocka", "libpcap",
             "libibverbs"]

# Features as seen in what the build linked: name, library soname prefix.
FEATURES = [("cuda", "libcudart.so"), ("cufft", "libcufft.so"),
            ("hdf5", "libhdf5"), ("fftw", "libfftw3f.so"),
            ("yaml", "libyaml-0.so"), ("zmq", "libzmq.so"),
            ("jansson", "libjansson.so"), ("microhttpd", "libmicrohttpd.so"),
            ("pcap", "libpcap.so"), ("ibverbs", "libibverbs.so"),
            ("cmocka", "libcmocka.so")]


def apt_depends(pkgs):
    """{package: [dependencies]} for pkgs and all they lead to (one apt-cache
    call; it follows every alternative, the walk below only the first)."""
    out = subprocess.run(["apt-cache", "depends", "--recurse", "--no-recommends",
                          "--no-suggests", "--no-conflicts", "--no-breaks",
                          "--no-replaces", "--no-enhances", *sorted(pkgs)],
                         check=True, capture_output=True, text=True).stdout
    deps, cur, prev_alt, want_provider = {}, None, False, False
    for line in out.splitlines():
        if not line.startswith(" "):
            cur = line.strip()
            deps[cur], prev_alt, want_provider = [], False, False
            continue
        m = re.match(r"^ (\||\s)(\w+): (\S+)", line)
        if m:
            alt, kind, name = m.group(1) == "|", m.group(2), m.group(3)
            first = not prev_alt
            prev_alt = alt
            want_provider = False
            if kind not in DEP_KINDS or not first:
                continue
            if name.startswith("<"):
                want_provider = True   # virtual: its first provider follows
            else:
                deps[cur].append(name)
        elif want_provider and line.startswith("    "):
            deps[cur].append(line.strip())
            want_provider = False
    return deps


def closure(roots, follow=lambda p: True):
    graph = apt_depends(roots)
    seen, todo = set(), set(roots)
    while todo:
        seen |= todo
        todo = {d for p in todo for d in graph.get(p, [])
                if d not in seen and follow(d)}
    return seen


def base_packages():
    """Essential packages and apt, with their closure: on every Debian/Ubuntu."""
    q = subprocess.run(["dpkg-query", "-W", "-f=${Package}\t${Essential}\n"],
                       check=True, capture_output=True, text=True).stdout
    essential = [l.split("\t")[0] for l in q.splitlines() if l.endswith("\tyes")]
    return closure(essential + ["apt"])


def carried_packages(drop=()):
    # Only libraries are followed: a library's helper programs (adduser for
    # libibverbs1) are not needed to load it.
    need = closure(ROOTS, lambda p: p.startswith("lib"))
    return sorted(need - base_packages() - set(drop))


def ldd_libs(build):
    """{soname: path or None} over every ELF file under build."""
    elves = []
    for root, _dirs, files in os.walk(build):
        for f in files:
            path = os.path.join(root, f)
            if os.path.islink(path) or ".so" not in f and not os.access(path, os.X_OK):
                continue
            with open(path, "rb") as fh:
                if fh.read(4) == b"\x7fELF":
                    elves.append(path)
    libs = {}
    if not elves:
        return libs
    r = subprocess.run(["ldd", *elves], capture_output=True, text=True)
    for line in r.stdout.splitlines():
        m = re.match(r"\s+(\S+) => (not found|\S+)", line)
        if m:
            p = None if m.group(2) == "not found" else m.group(2)
            libs[m.group(1)] = libs.get(m.group(1)) or p
    return libs


def owners(paths):
    """{path: the Debian package that holds it}, one dpkg call."""
    cands = {}
    for path in paths:
        for p in {path, os.path.realpath(path)}:
            # merged /usr: dpkg may know either spelling
            for q in (p, p[4:] if p.startswith("/usr/lib/") else "/usr" + p):
                cands[q] = path
    r = subprocess.run(["dpkg", "-S", *sorted(cands)], capture_output=True, text=True)
    found = {}
    for line in r.stdout.splitlines():
        pkg, _, p = line.partition(": ")
        if p in cands:
            found[cands[p]] = pkg.split(":")[0]
    return found


def is_cuda(soname, path):
    """CUDA's libraries come with the toolkit and the driver, not the bundle."""
    return "/cuda" in (path or "") or re.match(
        r"lib(cuda|cudart|cufft|cublas|cublasLt|curand|cusolver|cusparse|nvrtc"
        r"|nvJitLink|nvidia-ml)\.so", soname) is not None


def check(build, bundle, drop):
    build = os.path.realpath(build)
    libs = ldd_libs(build)
    base = base_packages()
    pkgs = owners([p for p in libs.values() if p])
    carried = None if bundle else set(carried_packages(drop))
    bad = []
    for soname, path in sorted(libs.items()):
        if path and os.path.realpath(path).startswith(build + "/"):
            continue
        if is_cuda(soname, path):
            continue
        pkg = pkgs.get(path)
        if pkg in base:
            continue
        if bundle:
            ok = os.path.exists(os.path.join(bundle, ARCH_LIB, soname)) and pkg not in drop
        else:
            ok = pkg in carried
        if not ok:
            bad.append(f"{soname} ({path or 'not found here'}; package {pkg or '?'})")
    for b in bad:
        print(f"not in the bundle nor on a bare Debian/Ubuntu: {b}")
    if bundle:
        bad += pkgconfig_missing(bundle)
    print(f"{len(libs)} libraries needed, {len(bad)} not covered")
    return 1 if bad else 0


def test_python(build):
    try:
        with open(os.path.join(build, "meson-info", "intro-buildoptions.json")) as f:
            opts = {o["name"]: o["value"] for o in json.load(f)}
    except OSError:
        return None
    return opts.get("test_python") or shutil.which("python3")


def pkgconfig_missing(bundle):
    bundle = os.path.realpath(bundle)
    env = dict(os.environ, PKG_CONFIG_SYSROOT_DIR=bundle,
               PKG_CONFIG_LIBDIR=f"{bundle}/{ARCH_LIB}/pkgconfig:{bundle}/usr/share/pkgconfig")
    bad = []
    for name in PKGCONFIG:
        r = subprocess.run(["pkg-config", "--cflags", "--libs", name], env=env,
                           capture_output=True, text=True)
        if r.returncode != 0:
            msg = " ".join(r.stderr.split())
            print(f"pkg-config {name} fails from the bundle alone: {msg}")
            bad.append(name)
    return bad


def features(build):
    """One line a feature: built in or not, and from where; a summary last."""
    libs = ldd_libs(build)
    rows = []
    for name, prefix in FEATURES:
        hits = sorted(s for s in libs if s.startswith(prefix))
        where = ", ".join(f"{s} => {libs[s] or 'NOT FOUND'}" for s in hits)
        rows.append((name, bool(hits), where))
    # Tests that skip (exit 77) without these, however the libraries stand.
    fuzz = os.path.exists(os.path.join(build, "tests", "spead", "fuzz_packet"))
    rows.append(("libfuzzer", fuzz, "clang -fsanitize=fuzzer (fuzz tests)"))
    rows.append(("valgrind", shutil.which("valgrind") is not None, "(leak test)"))
    py = test_python(build)
    for mod in ("numpy", "h5py", "spead2", "aiokatcp", "prometheus_client"):
        r = subprocess.run([py, "-c", f"import {mod}"], capture_output=True) if py else None
        rows.append((f"py-{mod}", r is not None and r.returncode == 0, py or "no python"))
    for name, ok, where in rows:
        print(f"{name:20} {'yes' if ok else 'NO ':3}  {where}")
    print("built: " + " ".join(n for n, ok, _ in rows if ok) +
          "; NO: " + (" ".join(n for n, ok, _ in rows if not ok) or "none"))
    return 0


def main(argv):
    if not argv or argv[0] not in ("list", "check", "features"):
        print(__doc__, file=sys.stderr)
        return 2
    if argv[0] == "list":
        print("\n".join(carried_packages()))
        return 0
    if len(argv) < 2:
        print(__doc__, file=sys.stderr)
        return 2
    if argv[0] == "features":
        return features(argv[1])
    bundle, drop, rest = None, [], argv[2:]
    while rest:
        if rest[0] == "--bundle" and len(rest) > 1:
            bundle, rest = rest[1], rest[2:]
        elif rest[0] == "--drop" and len(rest) > 1:
            drop.append(rest[1])
            rest = rest[2:]
        else:
            print(__doc__, file=sys.stderr)
            return 2
    return check(argv[1], bundle, drop)


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
