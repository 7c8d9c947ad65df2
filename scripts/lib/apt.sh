# Debian packages for the setup scripts. Sourced, not run:
#   source scripts/lib/apt.sh
#   apt_install_missing LABEL PACKAGE...
# installs those of PACKAGE... that are not installed yet (as root, else through sudo) and says
# which, prefixed with LABEL; does nothing, not even `apt-get update`, when all are there.
# PACKAGE:ARCH of a foreign architecture needs `apt_add_architecture ARCH` first.

as_root=()
[ "$(id -u)" -eq 0 ] || as_root=(sudo)

# apt_add_architecture ARCH: lets dpkg install ARCH's packages beside the machine's own (Debian
# multiarch); the next apt_install_missing of an ARCH package then updates the package lists.
apt_add_architecture() {
  dpkg --print-foreign-architectures | grep -qx "$1" && return 0
  "${as_root[@]}" dpkg --add-architecture "$1"
}

apt_install_missing() {
  local label=$1
  shift
  local package
  local missing=()
  for package in "$@"; do
    dpkg-query -W -f='${Status}' "$package" 2>/dev/null | grep -q "install ok installed" || missing+=("$package")
  done
  ((${#missing[@]})) || return 0
  echo "$label: installing Debian packages: ${missing[*]}"
  "${as_root[@]}" apt-get update -q
  "${as_root[@]}" env DEBIAN_FRONTEND=noninteractive apt-get install -y -q --no-install-recommends "${missing[@]}"
}
