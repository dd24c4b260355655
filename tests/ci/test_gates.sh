#!/bin/sh
# The CI gates on files made to pass and to fail them, in a scratch git
# repository that holds the project's .clang-format and the gate scripts:
#   check-format.sh   a clean file passes; a file clang-format would change
#                     fails, and the failure names it
#   check-cppcheck.sh a clean file passes; an out-of-bounds read fails and is
#                     named; the same finding in the suppressions file passes
# Usage: test_gates.sh SOURCE_DIR. Exit 77 (skipped) without clang-format 14 or
# cppcheck; the last line is "N passed, N failed, N skipped".
# shellcheck disable=SC2016 # the conditions are expanded by eval, in expect
set -u
src=$1
passed=0 failed=0 skipped=0
expect() { # what, condition (a shell command)
    if eval "$2"; then
        passed=$((passed + 1))
    else
        failed=$((failed + 1))
        echo "FAIL $1"
    fi
}
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
mkdir -p "$work/.ci"
cp "$src/.clang-format" "$work/"
cp "$src/.ci/check-format.sh" "$src/.ci/check-cppcheck.sh" "$work/.ci/"
cd "$work" || exit 1
git init -q . && git config user.email gate@test && git config user.name gate

has_clang_format_14() {
    for c in ${CLANG_FORMAT:-} clang-format-14 clang-format; do
        if "$c" --version 2>/dev/null | grep -q 'version 14\.'; then
            return 0
        fi
    done
    return 1
}

if has_clang_format_14; then
    printf 'int add(int a, int b)\n{\n    return a + b;\n}\n' >good.c
    git add good.c
    out=$(.ci/check-format.sh 2>&1)
    expect "check-format on a clean file: $out" '[ $? -eq 0 ]'
    printf 'int  add( int a,int b ){ return a+b; }\n' >bad.c
    git add bad.c
    out=$(.ci/check-format.sh 2>&1)
    rc=$?
    expect "check-format on an unformatted file: exit $rc" '[ $rc -eq 1 ]'
    expect "check-format names the file: $out" 'echo "$out" | grep -q "not clang-format clean: bad.c"'
    expect "check-format passes good.c alone" '.ci/check-format.sh good.c >/dev/null 2>&1'
    git rm -q --cached bad.c && rm -f bad.c
else
    echo "SKIP check-format: no clang-format 14"
    skipped=$((skipped + 1))
fi

if command -v "${CPPCHECK:-cppcheck}" >/dev/null 2>&1; then
    out=$(.ci/check-cppcheck.sh 2>&1)
    expect "check-cppcheck on a clean file: $out" '[ $? -eq 0 ]'
    printf 'int third(void)\n{\n    int a[2] = {1, 2};\n    return a[2];\n}\n' >oob.c
    git add oob.c
    out=$(.ci/check-cppcheck.sh 2>&1)
    rc=$?
    expect "check-cppcheck on an out-of-bounds read: exit $rc" '[ $rc -eq 1 ]'
    expect "check-cppcheck names it: $out" 'echo "$out" | grep -q "oob.c:4: error (arrayIndexOutOfBounds)"'
    printf '# judged\narrayIndexOutOfBounds:oob.c\n' >.ci/cppcheck-suppressions.txt
    out=$(.ci/check-cppcheck.sh 2>&1)
    expect "check-cppcheck with the finding suppressed: $out" '[ $? -eq 0 ]'
else
    echo "SKIP check-cppcheck: no cppcheck"
    skipped=$((skipped + 1))
fi

echo "$passed passed, $failed failed, $skipped skipped"
if [ "$failed" -gt 0 ]; then
    exit 1
fi
if [ "$passed" -eq 0 ]; then
    exit 77
fi
exit 0
