#!/bin/sh
# Installs Debian's chromium, the browser the end-to-end tests drive (/usr/bin/chromium).
set -eu
if [ -x /usr/bin/chromium ]; then
  exit 0
fi
if [ "$(id -u)" -ne 0 ]; then
  SUDO=sudo
else
  SUDO=
fi
$SUDO apt-get update
$SUDO env DEBIAN_FRONTEND=noninteractive apt-get install -y --no-install-recommends chromium
