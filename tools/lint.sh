#!/usr/bin/env bash
# Size limits of production code (issue 31): no source file over MAX_FILE_LINES (700) lines and
# no function over MAX_FUNCTION_LINES (80) lines, counted by lizard (a function's length from its
# first line to its last, comments and blank lines included). Production code is the C++ under
# the folders below (kshardctl in tools/ ships too), and the SDKs and example apps in Go and
# Python (sdk/, examples/) without their tests; tests/, bench/ and fuzz/ are not checked. Functions named in
# tools/lint/allow.txt (option tables only, each with its reason) are exempt.
#
# Prints every violation, one a line, and exits 1 when there is any. `make lint` runs it.
set -euo pipefail
cd "$(dirname "$0")/.."
max_file=${MAX_FILE_LINES:-700}
max_function=${MAX_FUNCTION_LINES:-80}
folders=(base sharding protocol http kube operator sidecar metrics tools examples sdk)
allow=tools/lint/allow.txt

lizard=${LIZARD:-$(bash tools/python-venv.sh tools/lint/requirements.txt build/lint/venv lizard)}

existing=()
for d in "${folders[@]}"; do [[ -d $d ]] && existing+=("$d"); done
mapfile -t files < <(git ls-files -- "${existing[@]}" | grep -E '\.(h|hh|hpp|cc|cpp|go|py)$' |
  grep -vE '(_test\.go|/tests?/.*\.py|/test_[^/]*\.py)$')

failed=0
for f in "${files[@]}"; do
  lines=$(wc -l <"$f")
  if ((lines > max_file)); then
    echo "$f: $lines lines (limit $max_file)"
    failed=1
  fi
done

# lizard's CSV: nloc, ccn, tokens, parameters, length, location, file, function, long name,
# start, end.
allowed=$(grep -v '^\s*#' "$allow" | sed 's/#.*//' | awk 'NF >= 2 {print $1 " " $2}')
while IFS=, read -r _ _ _ _ length _ file function _; do
  file=${file//\"/}
  function=${function//\"/}
  ((length > max_function)) || continue
  if grep -qxF "$file $function" <<<"$allowed"; then continue; fi
  echo "$file: $function is $length lines (limit $max_function)"
  failed=1
done < <("$lizard" --csv "${files[@]}")

if ((failed)); then
  echo "lint: production code over the size limits (tools/lint.sh)" >&2
  exit 1
fi
echo "lint: ${#files[@]} files within $max_file lines, every function within $max_function"
