#!/usr/bin/env bash
# System packages some tests use (real-kernel checks, captures, the HTML report in a
# browser). Installed only when running as root and missing; tests that need a package
# that is absent skip with the reason.
set -euo pipefail
need=()
command -v ip >/dev/null || need+=(iproute2)
command -v tcpdump >/dev/null || need+=(tcpdump)
command -v ethtool >/dev/null || need+=(ethtool)
command -v chromium >/dev/null || need+=(chromium)
command -v editcap >/dev/null || need+=(wireshark-common)
if [ ${#need[@]} -eq 0 ]; then exit 0; fi
if [ "$(id -u)" != 0 ]; then
  echo "setup-system: not root; tests needing ${need[*]} will skip" >&2
  exit 0
fi
export DEBIAN_FRONTEND=noninteractive
apt-get update -qq >/dev/null
apt-get install -y -qq --no-install-recommends "${need[@]}" >/dev/null
