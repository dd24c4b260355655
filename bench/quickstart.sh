#!/bin/sh
# The main job: installs what is missing (Debian), builds the release preset,
# and runs the default benchmark on every available backend. Extra arguments
# go to `xattn bench` (try --help).
set -eu
cd "$(dirname "$0")/.."
.ci/deps.sh
cmake --preset release >/dev/null
cmake --build --preset release
exec build/release/bench/xattn bench "$@"
