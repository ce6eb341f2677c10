#!/usr/bin/env bash
# System packages some tests use (real-kernel checks, captures, the HTML reports rendered
# to PNG by headless Chromium). Installed only when running as root and missing; tests
# that need a package that is absent skip with the reason.
set -euo pipefail
need=()
command -v ip >/dev/null || need+=(iproute2)
command -v tcpdump >/dev/null || need+=(tcpdump)
command -v ethtool >/dev/null || need+=(ethtool)
command -v chromium >/dev/null || need+=(chromium)
# a font for the screenshots' text: chromium only recommends one (fonts-liberation),
# which --no-install-recommends skips
dpkg -s fonts-dejavu-core >/dev/null 2>&1 || need+=(fonts-dejavu-core)
command -v editcap >/dev/null || need+=(wireshark-common)
if [ ${#need[@]} -eq 0 ]; then exit 0; fi
if [ "$(id -u)" != 0 ]; then
  echo "setup-system: not root; tests needing ${need[*]} will skip" >&2
  exit 0
fi
export DEBIAN_FRONTEND=noninteractive
apt-get update -qq >/dev/null
apt-get install -y -qq --no-install-recommends "${need[@]}" >/dev/null
