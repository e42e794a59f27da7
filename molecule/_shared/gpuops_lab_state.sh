#!/bin/sh
# The node's state in one text file, for comparing before and after a check-mode run:
# installed packages and their selections, every file under the watched trees (sha256, mode,
# owner; links by target), the names and sizes of installed binaries, and the unit states of
# the units the roles manage.
set -eu
out=$1
{
  echo "# packages"
  dpkg-query -W -f='${Package} ${Version} ${db:Status-Abbrev}\n' | sort
  echo "# files"
  for dir in /etc /var/lib/gpuops /etc/cdi /var/run/cdi /usr/lib/systemd/system; do
    [ -d "$dir" ] || continue
    find "$dir" -xdev \( -type f -o -type l \) ! -path /etc/mtab ! -name '*.pyc' -print 2>/dev/null
  done | sort -u | while IFS= read -r path; do
    if [ -L "$path" ]; then
      printf '%s -> %s\n' "$path" "$(readlink "$path")"
    else
      printf '%s %s %s\n' "$path" "$(stat -c '%a %U:%G' "$path")" "$(sha256sum < "$path" | cut -c1-64)"
    fi
  done
  echo "# binaries"
  find /usr/bin /usr/sbin /usr/local/bin -maxdepth 1 \( -type f -o -type l \) -printf '%p %s\n' 2>/dev/null | sort
  echo "# units"
  systemctl list-unit-files --no-legend --plain 2>/dev/null | sort
  systemctl list-units --all --no-legend --plain 2>/dev/null \
    | awk '$1 ~ /(containerd|docker|crio|nvidia|cdi|gpuops)/ {print $1, $3, $4}' | sort
} > "$out"
