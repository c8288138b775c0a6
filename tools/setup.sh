#!/usr/bin/env bash
# Creates .venv and installs everything snapuq needs: Debian packages (when run as root) and pip packages.
# Idempotent and quick when nothing changed (stamp files in .venv/).
set -euo pipefail
cd "$(dirname "$0")/.."
ROOT=$PWD
PY=${PYTHON:-python3}

# --- Debian packages: cross compiler, newlib, QEMU (Cortex-M boards), clang (libFuzzer, sanitizers), espeak-ng data tools,
# and the offline speech synthesizers of the keywords12 set (flite; festival with three English voices and ten
# recorded speakers of other languages who read the English words with an accent; optional: the set skips a
# synthesizer or voice that is absent and records which voices it used)
DEB_PKGS="gcc-arm-none-eabi libnewlib-arm-none-eabi qemu-system-arm clang libclang-rt-14-dev make gcc
flite festival festvox-kallpc16k festvox-kdlpc16k festvox-us-slt-hts
festvox-italp16k festvox-itapc16k festvox-ca-ona-hts festvox-czech-dita festvox-czech-krb festvox-czech-machac
festvox-czech-ph festvox-suopuhe-lj festvox-suopuhe-mv festvox-ru"
need_deb=""
for p in $DEB_PKGS; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || need_deb="$need_deb $p"
done
if [ -n "$need_deb" ]; then
  if [ "$(id -u)" = 0 ] && command -v apt-get >/dev/null; then
    echo "setup: installing Debian packages:$need_deb"
    export DEBIAN_FRONTEND=noninteractive
    apt-get update -q >/dev/null
    # shellcheck disable=SC2086
    apt-get install -y -q --no-install-recommends $need_deb >/dev/null
  else
    echo "setup: missing Debian packages; run: sudo apt-get install -y --no-install-recommends$need_deb" >&2
  fi
fi

# --- Python virtual environment
if [ ! -x .venv/bin/python ]; then
  echo "setup: creating .venv"
  "$PY" -m venv .venv
  .venv/bin/python -m pip install -q --upgrade pip
fi
stamp=.venv/.stamp-snapuq
if [ ! -f "$stamp" ] || [ pyproject.toml -nt "$stamp" ]; then
  echo "setup: installing snapuq and its dependencies into .venv (first time: a few minutes)"
  .venv/bin/python -m pip install -q -e ".[dev]"
  touch "$stamp"
fi

# --- PlatformIO: offline pieces (local SCons tool package), per-checkout core dir (the same folder
# platformio.ini names as core_dir, so a plain `pio run` in the checkout finds it without any variable)
export PLATFORMIO_CORE_DIR="$ROOT/.pio-core"
export PLATFORMIO_SETTING_ENABLE_TELEMETRY=No
export PLATFORMIO_DISABLE_UPGRADE_CHECK=true
if [ -d firmware/platforms/tool-scons ] && [ ! -e "$PLATFORMIO_CORE_DIR/packages/tool-scons" ] \
   && [ ! -e "$PLATFORMIO_CORE_DIR/packages/tool-scons.pio-link" ]; then
  .venv/bin/pio pkg install -g -t "symlink://$ROOT/firmware/platforms/tool-scons" >/dev/null 2>&1 || \
    echo "setup: warning: could not register the local tool-scons package with PlatformIO" >&2
  # this checkout's core dir only: no telemetry from the offline builds
  .venv/bin/pio settings set enable_telemetry No >/dev/null 2>&1 || true
fi
exit 0
