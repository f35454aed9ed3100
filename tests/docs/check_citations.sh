#!/bin/sh
# Formats and numeric conventions are documented in docs/formats.md, in the
# project's own words. This check fails when a source file, a document, or
# anything cbf-inspect prints about a plugin points instead at the design
# documents the project started from (the specification page and the
# design notes it was built from), which are not part of the repository.
#
#   check_citations.sh SOURCE_ROOT CBF_INSPECT
#
# The patterns are spelled with bracket classes so that this file does not
# match itself. Random-number seeds (dsim, tests, fuzz corpora) are fine:
# only phrasings that cite a document are refused.
set -u
root=$1
inspect=$2

# The specification page, by name or as a bare upper-case word.
spec='(^|[^A-Za-z0-9_])S[P]EC([^A-Za-z0-9_]|$)'
# The design notes: "as the <s>eed does", "the <s>eeds are silent", "(<s>eeds)",
# "<s>eed 001", "the <s>eed's design", file names of the notes, ...
notes="as (in )?the s[e]eds?\\b|the s[e]eds?'|the s[e]ed's|(^|[[:space:]])\\(s[e]eds?\\)"
notes="$notes|the s[e]eds? (do|does|did|describes?|says?|leaves?|notes?|suggests?|uses?)\\b"
notes="$notes|s[e]eds? (are|is) silent|s[e]eds? (derivation|design|documents?|docs?|notes)\\b"
notes="$notes|s[e]eds? [0-9]{3}\\b|s[e]eds/|[0-9]{3}_[0-9a-f]{16}"

status=0
# Reports the lines of $tmp that cite, prefixed with $1. A phrase may be
# wrapped onto the next line (after a comment leader), so each line is
# also read joined to the next; such a hit is reported at its first line
# unless one of the two lines was reported already.
report() {
    one=$( (grep -nE "$spec"; true) <"$tmp"; (grep -niE "$notes"; true) <"$tmp")
    two=$(awk '{ t = $0; sub(/^[[:space:]]*([*#]+|\/\/)?[[:space:]]*/, "", t)
                 if (NR > 1) print NR - 1 ":" prev " " t; prev = $0 }' "$tmp" |
          (grep -iE "$notes"; true))
    if [ -n "$two" ]; then
        seen=$(printf '%s\n' "$one" | cut -d: -f1 | tr '\n' ' ')
        two=$(printf '%s\n' "$two" | awk -v seen=" $seen" '{
                  n = $0; sub(/:.*/, "", n)
                  if (index(seen, " " n " ") == 0 && index(seen, " " (n + 1) " ") == 0) print }')
    fi
    hits=$(printf '%s\n%s\n' "$one" "$two" | grep -v '^$')
    if [ -n "$hits" ]; then
        printf '%s\n' "$hits" | sed "s|^|$1:|"
        status=1
    fi
}

tmp=$(mktemp) || exit 1
trap 'rm -f "$tmp"' EXIT

# Files: git's view of the tree (tracked, and new files not ignored) when
# there is one, else every file outside build folders.
if git -C "$root" rev-parse --is-inside-work-tree >/dev/null 2>&1; then
    files=$(git -C "$root" ls-files --cached --others --exclude-standard)
else
    files=$(cd "$root" && find . -path './build*' -prune -o -path './.git' -prune -o -type f -print |
            sed 's|^\./||')
fi
n=0
for f in $files; do
    [ -f "$root/$f" ] || continue
    # Text only (grep -I skips binary files such as the fuzz corpus).
    grep -Iq '' "$root/$f" 2>/dev/null || continue
    cp "$root/$f" "$tmp"
    report "$f"
    n=$((n + 1))
done
if [ "$n" -eq 0 ]; then
    echo "check_citations: no files found under $root" >&2
    exit 1
fi

# cbf-inspect: the plugin list, then every plugin's parameters, ports and requests.
if ! "$inspect" >"$tmp" 2>&1; then
    echo "check_citations: $inspect failed:" >&2
    cat "$tmp" >&2
    exit 1
fi
report "cbf-inspect"
plugins=$(awk 'NR > 1 && /^[^ ]/ { print $1 }' "$tmp")   # folded summaries continue indented
if [ -z "$plugins" ]; then
    echo "check_citations: cbf-inspect lists no plugins (CBF_PLUGIN_PATH?)" >&2
    exit 1
fi
np=0
for p in $plugins; do
    if ! "$inspect" "$p" >"$tmp" 2>&1; then
        echo "check_citations: $inspect $p failed:" >&2
        cat "$tmp" >&2
        exit 1
    fi
    report "cbf-inspect $p"
    np=$((np + 1))
done

if [ "$status" -ne 0 ]; then
    echo "check_citations: the lines above cite documents outside the repository;" \
         "point them at docs/formats.md (or say it in place) instead" >&2
else
    echo "check_citations: $n files and $np plugins' cbf-inspect output are clean"
fi
exit "$status"
