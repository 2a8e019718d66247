#!/usr/bin/env bash
# SPDX-License-Identifier: MIT
# The licence (LICENSE, MIT): every source file of the tree carries "SPDX-License-Identifier" on
# its first line (after a shebang, its second), checked by scripts/spdx --check, which names each
# file without it and each file of a kind it does not know. And scripts/spdx itself, on scratch
# files: it tags each comment syntax, keeps a shebang first and the file's own first comment right
# after the tag, keeps the mode, leaves a tagged file (any licence) alone, and a second run
# changes nothing.
# usage: cli_spdx.sh DDPC_BIN SOURCE_DIR
set -u
src=$2
. "$(dirname "${BASH_SOURCE[0]}")/lib/check.sh"
spdx=$(cd "$src" && pwd)/scripts/spdx

"$spdx" --check >"$tmp/check.log" 2>&1
check_status "every source file has its SPDX tag (scripts/spdx --check)" $? "$tmp/check.log"
check "LICENSE is the MIT licence of the ddpc authors" \
    grep -q "^Copyright (c) 2026 The ddpc authors$" "$src/LICENSE"
check "README.md names the licence" grep -qF "MIT (\`LICENSE\`)" "$src/README.md"

# Scratch files of each kind, as a new contributor would add them.
mkdir -p "$tmp/t/sub" "$tmp/t/tests/fuzz/seeds/x"
cd "$tmp/t" || exit 1
printf '/* A kernel. */\nint x;\n' >sub/a.c
printf '// A header.\n' >sub/b.h
printf '/* exports */\n{ global: *; };\n' >lib.map
printf '#!/usr/bin/env bash\n# A script.\necho hi\n' >run.sh
chmod 755 run.sh
printf '#!/usr/bin/python3\n"""Doc."""\n' >tool.py
printf '# A config.\nlr: 0.1\n' >c.yaml
printf '#!/bin/sh\necho tool\n' >sub/tool
printf 'x: 1\n' >CMakeLists.txt
printf '# SPDX-License-Identifier: Apache-2.0\n# Vendored.\n' >vendored.cmake
printf 'raw bytes' >tests/fuzz/seeds/x/seed
printf '# Notes\n' >notes.md
files=(sub/a.c sub/b.h lib.map run.sh tool.py c.yaml sub/tool CMakeLists.txt vendored.cmake
    tests/fuzz/seeds/x/seed notes.md)

"$spdx" --check "${files[@]}" >"$tmp/c1.log" 2>&1
rc=$?
check "--check fails on untagged files" test $rc -ne 0
check "--check names sub/a.c" grep -q "^sub/a.c: no SPDX" "$tmp/c1.log"
check "--check names the extensionless script" grep -q "^sub/tool: no SPDX" "$tmp/c1.log"
check "--check leaves the vendored file, the seed and the notes alone" \
    bash -c "! grep -Eq '^(vendored.cmake|tests/fuzz|notes.md)' '$tmp/c1.log'"
check "--check changed nothing" grep -qx '/\* A kernel. \*/' sub/a.c

"$spdx" "${files[@]}" >"$tmp/add.log" 2>&1
check_status "scripts/spdx tags them" $? "$tmp/add.log"
check "C: tag, then the file's own first comment" \
    test "$(head -2 sub/a.c)" = "$(printf '// SPDX-License-Identifier: MIT\n/* A kernel. */')"
check "linker script: a /* */ tag" \
    test "$(head -1 lib.map)" = "/* SPDX-License-Identifier: MIT */"
check "shell: the shebang stays first, then the tag, then the comment" \
    test "$(head -3 run.sh)" = "$(printf '#!/usr/bin/env bash\n# SPDX-License-Identifier: MIT\n# A script.')"
check "the script is still executable" test -x run.sh
check "Python: after the shebang, before the docstring" \
    test "$(sed -n 2,3p tool.py)" = "$(printf '# SPDX-License-Identifier: MIT\n"""Doc."""')"
check "YAML and CMake: a # tag" bash -c \
    "head -1 c.yaml | grep -qx '# SPDX-License-Identifier: MIT' &&
     head -1 CMakeLists.txt | grep -qx '# SPDX-License-Identifier: MIT'"
check "the vendored file keeps its licence" \
    test "$(head -1 vendored.cmake)" = "# SPDX-License-Identifier: Apache-2.0"
check "the seed and the notes are untouched" \
    bash -c "test \"\$(cat tests/fuzz/seeds/x/seed)\" = 'raw bytes' && test \"\$(cat notes.md)\" = '# Notes'"
check "a tagged file passes --check" "$spdx" --check "${files[@]}"
sum1=$(cat "${files[@]}" | md5sum)
"$spdx" "${files[@]}" >"$tmp/again.log" 2>&1
check "a second run changes nothing" test "$(cat "${files[@]}" | md5sum)" = "$sum1"
check "and says nothing" test ! -s "$tmp/again.log"

printf 'data\n' >blob.bin
"$spdx" --check blob.bin >"$tmp/unknown.log" 2>&1
rc=$?
check "an unknown kind of file fails --check, named" \
    bash -c "[ $rc -ne 0 ] && grep -q '^blob.bin: a kind of file scripts/spdx does not know' '$tmp/unknown.log'"
summary
