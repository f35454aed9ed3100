#!/usr/bin/env bash
# The kernels hold no timing-only compile switches; the developers' variants
# are patches (dev/variants/*.patch) and tuning values, which
# dev/variant-src.sh makes on a copy of kernels/ (dev/device-variant-lib.sh).
# Checked here, without a GPU, so that a kernel edit that breaks a variant
# fails at once, not on the GPU machine:
#   - every #ifndef in kernels/ is an include guard (no -D override left);
#   - every patch applies, strictly, to kernels/ as it is, changes it, and
#     is listed in dev/variants/README.md;
#   - every tuning value (#define in kernels/*/*_tuning.h) can be set, one
#     line changed;
#   - and the check can fail: a patch whose context was edited away, an
#     unknown patch and an unknown name are refused, naming the edit (and a
#     DEST that is some other folder is left alone).
# Args: SOURCE_ROOT
set -u
src=$(realpath "$1") || exit 2
tool="$src/dev/variant-src.sh"
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
fail=0
bad() { echo "FAIL: $*"; fail=1; }

# No switch: an #ifndef NAME is followed by #define NAME, NAME ending in _H
# or _CUH (an include guard).
while IFS=: read -r file line rest; do
    name=$(sed -E 's/^[[:space:]]*#[[:space:]]*ifndef[[:space:]]+([A-Za-z0-9_]+).*/\1/' <<<"$rest")
    next=$(sed -n "$((line + 1))p" "$src/$file")
    if ! [[ $name =~ _(H|CUH)$ ]] || ! [[ $next =~ ^#define[[:space:]]+$name$ ]]; then
        bad "$file:$line: #ifndef $name is a compile-time switch, not an include guard: make it a" \
            "plain constant (a tuning header) and the alternative a dev/variants patch"
    fi
done < <(cd "$src" && grep -rnE '^[[:space:]]*#[[:space:]]*ifndef[[:space:]]' kernels)

n=0 ok=0
for p in "$src"/dev/variants/*.patch; do
    [ -e "$p" ] || continue
    name=$(basename "$p" .patch)
    n=$((n + 1))
    if ! out=$(bash "$tool" "$src" "$tmp/$name" "$name" 2>&1); then
        echo "$out"
        bad "dev/variants/$name.patch does not apply to kernels/: remake it against the tree"
    elif diff -rq "$src/kernels" "$tmp/$name/kernels" >/dev/null; then
        bad "dev/variants/$name.patch changes nothing"
    else
        ok=$((ok + 1))
    fi
    grep -q "\`$name\`" "$src/dev/variants/README.md" || bad "dev/variants/README.md does not list $name"
done
echo "$ok of $n patches apply to kernels/"

k=0
while read -r file def; do
    k=$((k + 1))
    if ! out=$(bash "$tool" "$src" "$tmp/knob" "$def=12345" 2>&1); then
        echo "$out"; bad "$def ($file) cannot be set"
    elif [ "$(diff -r "$src/kernels" "$tmp/knob/kernels" | grep -c "^> #define $def 12345$")" != 1 ] ||
         [ "$(diff -r "$src/kernels" "$tmp/knob/kernels" | grep -c '^[<>]')" != 2 ]; then
        bad "$def=12345 did not change exactly its one line"
    fi
done < <(cd "$src" && grep -HE '^#define [A-Za-z0-9_]+ ' kernels/*/*_tuning.h 2>/dev/null |
         sed -E 's/:#define ([A-Za-z0-9_]+) .*/ \1/')
echo "$k tuning values can be set"
[ "$k" -gt 0 ] || bad "no tuning values found in kernels/*/*_tuning.h"

# Must be able to fail: the first patch against a tree where its first hunk's
# first context line (one without a backslash) reads otherwise.
refuse() {   # what, expected words in the message, variant-src.sh arguments
    local what=$1 want=$2 out
    shift 2
    if out=$(bash "$tool" "$@" 2>&1); then
        bad "$what: variant-src.sh did not refuse"
    elif ! grep -q -- "$want" <<<"$out"; then
        echo "$out"; bad "$what: the refusal does not name $want"
    else
        echo "$what: refused, naming $want"
    fi
}
first=$(find "$src/dev/variants" -name '*.patch' | sort | head -1)
if [ -n "$first" ]; then
    name=$(basename "$first" .patch)
    file=$(grep -m1 '^+++ b/' "$first" | cut -c7-)
    ctx=$(sed -n '/^@@/,$p' "$first" | grep -m1 -E '^ [^\\]*[A-Za-z]+[^\\]*$' | cut -c2-)
    mkdir -p "$tmp/root/dev"
    cp -R "$src/kernels" "$tmp/root/" && cp -R "$src/dev/variants" "$tmp/root/dev/"
    awk -v line="$ctx" '!done && $0 == line { print $0 " /* edited */"; done = 1; next } { print }' \
        "$src/$file" >"$tmp/root/$file"
    if cmp -s "$src/$file" "$tmp/root/$file"; then
        bad "could not edit the context line '$ctx' of $name in $file"
    else
        refuse "$name against an edited $file" "$name" "$tmp/root" "$tmp/edited" "$name"
    fi
fi
refuse "an unknown patch" "no-such-variant" "$src" "$tmp/unknown" no-such-variant
mkdir -p "$tmp/other" && : >"$tmp/other/keep"
refuse "a DEST that is not a variant copy" "not a variant copy" "$src" "$tmp/other"
[ -e "$tmp/other/keep" ] || bad "variant-src.sh removed a folder it had not made"
refuse "an unknown name" "NO_SUCH_VALUE" "$src" "$tmp/unknown" NO_SUCH_VALUE=1
exit $fail
