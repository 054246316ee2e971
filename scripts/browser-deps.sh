#!/usr/bin/env bash
# Installs what the dashboard's browser tests drive: Debian's Chromium and its WebDriver server
# (packages `chromium` and `chromium-driver`). Does nothing when both are there already.
set -euo pipefail
if [ -x /usr/bin/chromium ] && [ -x /usr/bin/chromedriver ]; then
    exit 0
fi
sudo=""
if [ "$(id -u)" -ne 0 ]; then
    sudo="sudo"
fi
$sudo apt-get update
DEBIAN_FRONTEND=noninteractive $sudo apt-get install -y --no-install-recommends chromium chromium-driver
