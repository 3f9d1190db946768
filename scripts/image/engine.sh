# Sourced by scripts/image-build.sh and scripts/image-smoke.sh: picks the container engine and makes it usable.
#
#   engine_setup NAME     sets $ENGINE (podman or docker), installing podman from Debian when neither works
#
# RFDETR_CONTAINER_ENGINE=podman|docker forces one. docker counts only when its daemon answers (a docker
# client with no daemon is common). podman is run with scripts/image/containers.conf (runc, cgroupfs, no
# default ulimits: what works on the project's machines, issue 37): installed as /etc/containers/containers.conf
# when the machine has none, otherwise given through CONTAINERS_CONF so the machine's own file is left alone.
# A CONTAINERS_CONF already set is honoured as it is.

engine_dir=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)

engine_install_podman() { # NAME
  local name=$1 pkgs=(podman runc uidmap)
  if [ "$(id -u)" != 0 ] || ! command -v apt-get >/dev/null 2>&1; then
    echo "$name: no container engine (podman, or docker with a running daemon); run as root:" >&2
    echo "$name:   apt-get install -y --no-install-recommends ${pkgs[*]}" >&2
    exit 1
  fi
  echo "$name: installing ${pkgs[*]} from Debian (no container engine here)" >&2
  export DEBIAN_FRONTEND=noninteractive
  apt-get -o DPkg::Lock::Timeout=600 update -qq >&2
  apt-get -o DPkg::Lock::Timeout=600 install -y -qq --no-install-recommends "${pkgs[@]}" >&2
}

engine_setup() { # NAME
  local name=$1
  ENGINE=${RFDETR_CONTAINER_ENGINE:-}
  if [ -z "$ENGINE" ]; then
    if command -v podman >/dev/null 2>&1; then ENGINE=podman
    elif command -v docker >/dev/null 2>&1 && docker info >/dev/null 2>&1; then ENGINE=docker
    else engine_install_podman "$name"; ENGINE=podman
    fi
  fi
  case "$ENGINE" in
    podman|docker) ;;
    *) echo "$name: RFDETR_CONTAINER_ENGINE='$ENGINE'; expected podman or docker" >&2; exit 2 ;;
  esac
  command -v "$ENGINE" >/dev/null 2>&1 || { echo "$name: RFDETR_CONTAINER_ENGINE=$ENGINE but $ENGINE is not installed" >&2; exit 1; }
  if [ "$ENGINE" = podman ] && [ -z "${CONTAINERS_CONF:-}" ]; then
    if [ ! -e /etc/containers/containers.conf ] && [ "$(id -u)" = 0 ]; then
      install -D -m 0644 "$engine_dir/containers.conf" /etc/containers/containers.conf
      echo "$name: wrote /etc/containers/containers.conf (runc, cgroupfs, no default ulimits; from scripts/image/containers.conf)" >&2
    elif ! cmp -s "$engine_dir/containers.conf" /etc/containers/containers.conf; then
      export CONTAINERS_CONF=$engine_dir/containers.conf
      echo "$name: using CONTAINERS_CONF=$CONTAINERS_CONF (the machine's own containers.conf is left as it is)" >&2
    fi
  fi
}
