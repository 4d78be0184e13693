#!/usr/bin/env bash
# Sourced by install-vllm.sh and install-sglang.sh (a copy travels in p01 beside install.sh):
# finds the piece folders (PARTS) and the interpreter (PYTHON), checks every piece listed in
# MANIFEST.txt, re-joins split wheels into WHEELDIR and checks them against SHA256SUMS, leaving
# their paths for step 4. WHEELS_NAME names the scratch folder.
die() { echo "install.sh: ERROR: $*" >&2; exit 1; }

script_dir=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
if [ $# -ge 1 ]; then
  PARTS=$(cd "$1" && pwd) || die "no such folder: $1"
elif [ -d "$PWD/p01" ]; then
  PARTS=$PWD
elif [ -d "$script_dir/p01" ]; then
  PARTS=$script_dir
elif [ -d "$script_dir/../p01" ]; then
  PARTS=$(cd "$script_dir/.." && pwd)
else
  die "cannot find the piece folders (p01, p02, ...); pass their parent folder as the first argument"
fi

if [ -z "${PYTHON:-}" ]; then
  if [ -x /opt/torch/.venv/bin/python3 ]; then PYTHON=/opt/torch/.venv/bin/python3; else PYTHON=python3; fi
fi
command -v sha256sum >/dev/null || die "sha256sum not found"
shopt -s nullglob
pieces=("$PARTS"/p[0-9][0-9])
[ ${#pieces[@]} -gt 0 ] || die "no piece folders p01.. under $PARTS"
echo "== pieces found under $PARTS: $(cd "$PARTS" && echo p[0-9][0-9])"

sums=""
for p in "${pieces[@]}"; do [ -f "$p/SHA256SUMS" ] && { sums="$p/SHA256SUMS"; break; }; done
[ -n "$sums" ] || die "SHA256SUMS not found in any piece"
manifest=""
for p in "${pieces[@]}"; do [ -f "$p/MANIFEST.txt" ] && { manifest="$p/MANIFEST.txt"; break; }; done

# 1. completeness check against MANIFEST.txt ("pNN  file  bytes" lines)
missing=0
if [ -n "$manifest" ]; then
  while read -r piece file size; do
    case "$piece" in p[0-9][0-9]) ;; *) continue ;; esac
    if [ ! -f "$PARTS/$piece/$file" ]; then
      echo "   MISSING: $piece/$file" >&2; missing=1
    elif [ "$(stat -c %s "$PARTS/$piece/$file")" != "$size" ]; then
      echo "   WRONG SIZE: $piece/$file (expected $size bytes)" >&2; missing=1
    fi
  done < "$manifest"
  [ $missing -eq 0 ] || die "some pieces are missing or truncated (see above)"
  echo "== all files listed in MANIFEST.txt are present"
fi

# 2. gather wheels and re-join split ones
if [ -z "${WHEELDIR:-}" ]; then WHEELDIR=$(mktemp -d "/tmp/${WHEELS_NAME:-engine}-wheels.XXXXXX"); fi
mkdir -p "$WHEELDIR" || die "cannot create $WHEELDIR"
for p in "${pieces[@]}"; do
  for w in "$p"/*.whl; do
    cp -f "$w" "$WHEELDIR/" || die "copy failed: $w"
  done
done
bases=$(for p in "${pieces[@]}"; do for f in "$p"/*.whl.part[0-9][0-9]; do b=$(basename "$f"); echo "${b%.part[0-9][0-9]}"; done; done | sort -u)
for base in $bases; do
  parts=$(for p in "${pieces[@]}"; do for f in "$p/$base".part[0-9][0-9]; do echo "$(basename "$f") $f"; done; done | sort | awk '{print $2}')
  echo "== re-joining $base from $(echo "$parts" | wc -l) parts"
  # shellcheck disable=SC2086
  cat $parts > "$WHEELDIR/$base" || die "cat failed for $base"
done

# 3. checksums
echo "== checking sha256 of $(grep -c . "$sums") wheels"
( cd "$WHEELDIR" && sha256sum --quiet -c "$sums" ) || die "checksum mismatch (see above); nothing was installed"
echo "== checksums OK"

