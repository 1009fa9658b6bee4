#!/usr/bin/env bash
# Usage: readme_snippet.sh OUT_DIR   (needs CONSUL_HTTP_ADDR; run from the repository root)
# Extracts the C snippet of README.md ("### C and C++"), wraps it in main(), builds it against
# target/debug/baton-lib and runs it, so the README's C code cannot rot.
set -euo pipefail
out=$1
src="$out/readme_snippet.c"
body=$(sed -n '/^### C and C++/,/^## /p' README.md | sed -n '/^```c$/,/^```$/p' | sed '1d;$d')
[ -n "$body" ] || { echo "readme_snippet: no C snippet found in README.md" >&2; exit 1; }
{
    echo '#include <stdint.h>'
    printf '%s\n' "$body" | grep '^#include'
    echo 'int main(void) {'
    printf '%s\n' "$body" | grep -v '^#include'
    echo 'return 0;'
    echo '}'
} >"$src"
cc -std=c11 -Wall -Wextra -Werror -Iinclude "$src" -Ltarget/debug/baton-lib -lbaton \
    -Wl,-rpath,"$PWD/target/debug/baton-lib" -o "$out/readme_snippet"
"$out/readme_snippet"
echo "readme_snippet: the README's C snippet built and ran"
