#!/bin/sh
# Regenerates configure and Makefile.in; run once after a fresh clone.
# The TAP test driver ships with automake; it is copied, never committed.
set -e
cd "$(dirname "$0")"
mkdir -p build-aux m4
autoreconf -fi
tap=$(ls /usr/share/automake-*/tap-driver.sh 2>/dev/null | tail -n 1)
[ -n "$tap" ] || { echo "autogen.sh: tap-driver.sh not found (apt-get install automake)" >&2; exit 1; }
cp -f "$tap" build-aux/tap-driver.sh
