#!/usr/bin/env bash
# Fetches what the `tt` engine compiles and links against without building tt-metal (the Dockerfile's ttnn-sdk
# stage): the ttnn wheel's libraries from PyPI and the host headers of tt-metal's release tag.
#
#   scripts/fetch-ttnn-sdk.sh DEST VERSION [HEADERS_TARBALL]
#       e.g. /opt/ttnn-sdk 0.78.0; VERSION empty: creates DEST, fetches nothing
#       HEADERS_TARBALL: a tt-metal-headers-*.tar.xz (../shared/ttnn-sdk's layout: tt-metal-headers/{tt-metal,deps})
#       unpacked as DEST/headers instead of cloning from GitHub. Its headers must be of VERSION's API generation:
#       ../shared/ttnn-sdk's are 0.70.1's, so scripts/image-build.sh pairs them with VERSION=0.70.1.
#
# DEST/wheel    the unpacked wheel, minus its Python modules: ttnn/build/lib (_ttnncpp.so, libtt_metal.so, ...),
#               ttnn.libs (MPI, hwloc, numa), ttnn/tt_metal (the runtime files TT_METAL_RUNTIME_ROOT names),
#               ttnn-VERSION.dist-info (the version CMake reads)           -> RFDETR_TTNN_WHEEL
# DEST/headers  tt-metal/ (a shallow, blob-filtered, sparse clone of tag vVERSION with the umd submodule) and
#               deps/ (the header-only libraries at the versions that tag's cmake/dependencies.cmake pins)
#                                                                          -> RFDETR_TTNN_HEADERS
# The GitHub path is written and reviewed, not run on the project's machines (no access to GitHub there); the
# HEADERS_TARBALL path with 0.70.1 is what `scripts/image-build.sh tt` runs there (issue 37).
set -euo pipefail
dest=${1:?usage: fetch-ttnn-sdk.sh DEST VERSION [HEADERS_TARBALL]}
version=${2-}
tarball=${3-}
mkdir -p "$dest/wheel" "$dest/headers"  # always: the Dockerfile copies DEST/wheel into the runtime stage
if [ -z "$version" ]; then
  echo "fetch-ttnn-sdk: no ttnn version requested (CPU build): nothing fetched" >&2
  exit 0
fi

if [ -n "$tarball" ] && [ ! -r "$tarball" ]; then
  echo "fetch-ttnn-sdk: cannot read the headers tarball '$tarball' (expected a tt-metal-headers-*.tar.xz)" >&2
  exit 2
fi
pkgs=(ca-certificates python3 python3-pip)
if [ -n "$tarball" ]; then pkgs+=(xz-utils); else pkgs+=(git); fi
missing=()
for p in "${pkgs[@]}"; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
done
if [ ${#missing[@]} -gt 0 ]; then
  [ "$(id -u)" = 0 ] || { echo "fetch-ttnn-sdk: missing ${missing[*]}; run: sudo apt-get install -y ${missing[*]}" >&2; exit 1; }
  export DEBIAN_FRONTEND=noninteractive
  apt-get update -qq && apt-get install -y -qq --no-install-recommends "${missing[@]}"
fi

# The libraries. The wheel's C++ libraries do not depend on its Python version.
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
python3 -m pip download --quiet --no-deps --only-binary=:all: --python-version 3.10 \
  --platform manylinux_2_34_x86_64 "ttnn==$version" -d "$tmp"
python3 -m zipfile -e "$tmp"/ttnn-"$version"-*.whl "$tmp/wheel"
mkdir -p "$dest/wheel/ttnn"
mv "$tmp/wheel/ttnn/build" "$tmp/wheel/ttnn/tt_metal" "$dest/wheel/ttnn/"
mv "$tmp/wheel/ttnn.libs" "$tmp/wheel/ttnn-$version.dist-info" "$dest/wheel/"

if [ -n "$tarball" ]; then
  tar -xJf "$tarball" -C "$dest/headers" --strip-components=1
  [ -f "$dest/headers/tt-metal/ttnn/api/ttnn/device.hpp" ] && [ -d "$dest/headers/deps/fmt/include" ] || {
    echo "fetch-ttnn-sdk: $tarball has no tt-metal-headers/tt-metal/ttnn/api/ttnn/device.hpp and deps/fmt/include" >&2
    exit 1
  }
  echo "fetch-ttnn-sdk: ttnn $version libraries, headers from $(basename "$tarball"): RFDETR_TTNN_WHEEL=$dest/wheel RFDETR_TTNN_HEADERS=$dest/headers" >&2
  exit 0
fi

# The headers: only the directories a host translation unit includes (../shared/ttnn-sdk/README.md lists them).
src=$dest/headers/tt-metal
git clone --quiet --depth 1 --branch "v$version" --filter=blob:none --sparse https://github.com/tenstorrent/tt-metal "$src"
git -C "$src" sparse-checkout set ttnn/api ttnn/cpp tt_metal/api tt_metal/hostdevcommon tt_metal/include tt_stl \
  tt_metal/third_party/umd cmake LICENSE
git -C "$src" submodule update --quiet --init --depth 1 --filter=blob:none tt_metal/third_party/umd

# The header-only dependencies, at the pins of that tag's CPM calls.
python3 - "$src/cmake/dependencies.cmake" "$dest/headers/deps" <<'EOF'
import re, subprocess, sys
text = open(sys.argv[1]).read()
want = {"fmt": "fmtlib/fmt", "spdlog": "gabime/spdlog", "xtensor": "xtensor-stack/xtensor", "xtl": "xtensor-stack/xtl",
        "reflect": "boost-ext/reflect", "enchantum": "ZXShady/enchantum", "tt-logger": "tenstorrent/tt-logger",
        "tracy": "tenstorrent/tracy"}
for name, default_repo in want.items():
    block = re.search(r"CPMAddPackage\(\s*NAME\s+" + re.escape(name) + r"\b(.*?)\)", text, re.S | re.I)
    if not block:
        sys.exit(f"fetch-ttnn-sdk: {sys.argv[1]} has no CPMAddPackage(NAME {name} ...): the dependency list moved")
    body = block.group(1)
    repo = re.search(r"GITHUB_REPOSITORY\s+(\S+)", body)
    url = f"https://github.com/{repo.group(1) if repo else default_repo}"
    giturl = re.search(r"GIT_REPOSITORY\s+(\S+)", body)
    url = giturl.group(1) if giturl else url
    tag = re.search(r"GIT_TAG\s+(\S+)", body) or re.search(r"VERSION\s+(\S+)", body)
    if not tag:
        sys.exit(f"fetch-ttnn-sdk: no GIT_TAG or VERSION for {name} in {sys.argv[1]}")
    ref = tag.group(1)
    out = f"{sys.argv[2]}/{name}"
    subprocess.run(["git", "init", "--quiet", out], check=True)
    # CPM's VERSION form means the tag v<VERSION>; GIT_TAG is a tag or a commit.
    if subprocess.run(["git", "-C", out, "fetch", "--quiet", "--depth", "1", url, ref]).returncode != 0:
        subprocess.run(["git", "-C", out, "fetch", "--quiet", "--depth", "1", url, "v" + ref], check=True)
    subprocess.run(["git", "-C", out, "checkout", "--quiet", "FETCH_HEAD"], check=True)
    print(f"fetch-ttnn-sdk: {name} {ref} from {url}", file=sys.stderr)
EOF
echo "fetch-ttnn-sdk: ttnn $version: RFDETR_TTNN_WHEEL=$dest/wheel RFDETR_TTNN_HEADERS=$dest/headers" >&2
