#!/usr/bin/env bash
# Build the C extensions with sanitizers into build/<kind>/ and run a command with them loaded:
#   bench/sanitize.sh asan COMMAND...   AddressSanitizer + UndefinedBehaviorSanitizer (with float-cast-overflow,
#                                       which gcc leaves out of -fsanitize=undefined)
#   bench/sanitize.sh tsan COMMAND...   ThreadSanitizer (the scanning threads, the read-ahead thread)
# A report aborts the process (bench/fuzz.py keeps the input that did it). NONGEMM_EXT_DIR tells
# bench/fuzz.py (and tests/conftest.py) where the sanitizer build is. See docs/reliability.md.
set -euo pipefail
cd "$(dirname "$0")/.."
kind=$1
shift
case $kind in
  asan) flags="-fsanitize=address,undefined,float-cast-overflow,float-divide-by-zero -fno-sanitize-recover=all"
        preload="$(gcc -print-file-name=libasan.so):$(gcc -print-file-name=libubsan.so)" ;;
  tsan) flags="-fsanitize=thread"
        preload="$(gcc -print-file-name=libtsan.so)" ;;
  *) echo "usage: $0 asan|tsan COMMAND..." >&2; exit 2 ;;
esac
out=build/$kind
rm -f "$out"/_nongemm_*.so
mkdir -p "$out"
# the flags in CC: the compiler links with them too (setup.py's zlib probe links a program)
CC="gcc $flags" CFLAGS="-g -O1 -fno-omit-frame-pointer" \
  python3 setup.py -q build_ext --build-lib "$out" --build-temp "$out/tmp" --force >"$out.log" 2>&1 || true
ls "$out"/_nongemm_scan*.so "$out"/_nongemm_sweep*.so >/dev/null 2>&1 \
  || { echo "the $kind build failed: $out.log" >&2; exit 2; }
export NONGEMM_EXT_DIR=$PWD/$out
export PYTHONMALLOC=${PYTHONMALLOC:-malloc}  # each Python object its own malloc: ASan sees a read past a bytes object
export ASAN_OPTIONS=${ASAN_OPTIONS:-detect_leaks=0:abort_on_error=1}
export UBSAN_OPTIONS=${UBSAN_OPTIONS:-halt_on_error=1:print_stacktrace=1}
export TSAN_OPTIONS=${TSAN_OPTIONS:-halt_on_error=1:abort_on_error=1}
# the interpreter itself, not a wrapper script (a shell under ThreadSanitizer crashes)
case $1 in python3|python) set -- "$(python3 -c 'import sys; print(sys.executable)')" "${@:2}" ;; esac
LD_PRELOAD=$preload exec "$@"
