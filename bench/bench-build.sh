# Sourced by the bench run.sh scripts: `here` (the calling script's folder), `root` (the repository) and
# bench_build [cmake --build args...], the Release build of that folder's CMake project into $here/build.
here=$(cd "$(dirname "$0")" && pwd)
root=$(cd "$here/../.." && pwd)
bench_build() {
  cmake -S "$here" -B "$here/build" -G Ninja -DCMAKE_BUILD_TYPE=Release >/dev/null
  cmake --build "$here/build" "$@" >&2
}
