#!/usr/bin/env bash
# A kernel variant's source: the tree's kernels/ copied to DEST/kernels
# with EDITs made to the copy, so that the shipped sources hold no
# timing-only switches (dev/device-variant-lib.sh compiles one file of the
# copy with the build's own nvcc command line).
#   dev/variant-src.sh SOURCE_ROOT DEST [EDIT ...]
# Each EDIT is
#   NAME (or NAME.patch)  dev/variants/NAME.patch applied, strictly (every
#                         context line as it is: offsets only, no fuzz);
#   NAME=VALUE            the one line `#define NAME ...` in kernels/ set to
#                         `#define NAME VALUE` (the tuning values in
#                         kernels/*/*_tuning.h, or any other #define that
#                         kernels/ holds once).
# Fails naming the EDIT that does not apply; DEST is then left as it was
# made so far. tests/scripts/check_variants.sh applies every patch this way.
set -u
[ $# -ge 2 ] || { echo "usage: $0 SOURCE_ROOT DEST [EDIT ...]" >&2; exit 2; }
root=$(cd "$1" && pwd) || exit 2
dest=$2
shift 2
# DEST is made anew: removed first only where this script made it (its
# mark inside) or where it is empty, never another folder given by mistake.
if [ -e "$dest" ] && [ ! -e "$dest/.variant-src" ] && [ -n "$(ls -A "$dest" 2>/dev/null)" ]; then
    echo "$0: $dest exists and is not a variant copy: give a new folder" >&2
    exit 2
fi
rm -rf "$dest" && mkdir -p "$dest" && cp -R "$root/kernels" "$dest/" && : >"$dest/.variant-src" || exit 1
dest=$(cd "$dest" && pwd)
for e in "$@"; do
    case $e in
    *=*)
        name=${e%%=*} value=${e#*=}
        [[ $name =~ ^[A-Za-z_][A-Za-z0-9_]*$ ]] || { echo "$0: $e: $name is not a macro name" >&2; exit 1; }
        pat="^[[:space:]]*#[[:space:]]*define[[:space:]]+$name([[:space:]].*)?\$"
        files=$(grep -rlE "$pat" "$dest/kernels")
        lines=$(grep -rhE "$pat" "$dest/kernels" | wc -l)
        if [ "$lines" != 1 ]; then
            echo "$0: $e: kernels/ defines $name on $lines lines, not 1${files:+ (${files//$dest\//})}" >&2
            exit 1
        fi
        value=${value//\\/\\\\} value=${value//&/\\&} value=${value//|/\\|}
        sed -E -i "s|$pat|#define $name $value|" "$files" || exit 1
        echo "$e: ${files#"$dest"/}"
        ;;
    *)
        p=$root/dev/variants/${e%.patch}.patch
        [ -f "$p" ] || { echo "$0: $e: no $p" >&2; exit 1; }
        command -v git >/dev/null || { echo "$0: $e: applying a patch takes git" >&2; exit 1; }
        # git apply outside any repository (DEST's parent is a ceiling: a
        # DEST inside a checkout would otherwise take paths from its top)
        if ! out=$(cd "$dest" && GIT_CEILING_DIRECTORIES=$(dirname "$dest") git apply --verbose "$p" 2>&1); then
            echo "$out" >&2
            echo "$0: $e: dev/variants/${p##*/} does not apply to kernels/ as it is now" >&2
            exit 1
        fi
        echo "$out"
        ;;
    esac
done
