#!/usr/bin/env bash
# Install the Debian packages named on the command line when their commands are missing.
# fio is required; the others are needed only by the Linux testbeds or, for chromium and
# chromium-driver, by the browser test of the write-ups, so failing to get them is a warning,
# not an error. Without root, say exactly what to install.
set -u
declare -A probe=(
  [fio]=fio [xfsprogs]=mkfs.xfs [btrfs-progs]=mkfs.btrfs [e2fsprogs]=mkfs.ext4
  [util-linux]=losetup [iproute2]=ip [nftables]=nft [python3-venv]=__venv__ [python3-pip]=__pip__
  [chromium]=chromium [chromium-driver]=chromedriver
)
missing=()
for pkg in "$@"; do
  cmd=${probe[$pkg]:-$pkg}
  case $cmd in
    __venv__) python3 -c 'import venv, ensurepip' 2>/dev/null && continue ;;
    __pip__) python3 -m pip --version >/dev/null 2>&1 && continue ;;
    *) PATH=$PATH:/usr/sbin:/sbin command -v "$cmd" >/dev/null 2>&1 && continue ;;
  esac
  missing+=("$pkg")
done
((${#missing[@]})) || exit 0
if [ "$(id -u)" != 0 ]; then
  echo "storagebench: missing system packages: ${missing[*]}" >&2
  echo "  install them as root:  apt-get install -y ${missing[*]}" >&2
  for m in "${missing[@]}"; do [ "$m" = fio ] && exit 1; done
  exit 0
fi
if ! command -v apt-get >/dev/null 2>&1; then
  echo "storagebench: missing ${missing[*]} and no apt-get here: install them with your package manager" >&2
  for m in "${missing[@]}"; do [ "$m" = fio ] && exit 1; done
  exit 0
fi
echo "storagebench: installing ${missing[*]} from Debian's packages" >&2
export DEBIAN_FRONTEND=noninteractive
apt-get update -qq >/dev/null && apt-get install -y -qq "${missing[@]}" >/dev/null
rc=$?
if [ $rc != 0 ] && printf '%s\n' "${missing[@]}" | grep -qx fio; then
  echo "storagebench: could not install fio (apt-get exit $rc)" >&2; exit 1
fi
exit 0
