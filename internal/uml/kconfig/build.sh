#!/bin/bash
# build.sh SERIES: build a user-mode-linux kernel from Debian's
# linux-source-SERIES package with proxybench.config built in.
#
# Output: ${PROXYBENCH_CACHE:-/var/cache/proxybench}/kernels/<pkgver>-<hash>/
#   linux   the stripped UML kernel binary
#   meta    key=value lines: series, pkgver, release, fragment_sha256, build_seconds, built
# where <pkgver> is the linux-source package version and <hash> the first 12
# hex digits of the fragment's sha256 (internal/uml computes the same key).
# A second run with the same source and fragment finds the kernel and exits at
# once. After `olddefconfig` and again after the build, every CONFIG_X=y line
# of the fragment must be =y in .config (and every "# CONFIG_X is not set"
# line not set); otherwise the build fails naming the option. A symbol the
# source does not define at all (renamed or merged across versions) is
# reported and skipped.
set -euo pipefail
unset MAKEFLAGS MFLAGS MAKELEVEL # a parent make's jobserver must not reach the kernel build
series=${1:?usage: build.sh SERIES (6.1 or 6.12)}
here=$(cd "$(dirname "$0")" && pwd)
frag=$here/proxybench.config
cache=${PROXYBENCH_CACHE:-/var/cache/proxybench}
tarball=/usr/src/linux-source-$series.tar.xz
if [ ! -f "$tarball" ]; then
	echo "build.sh: $tarball missing: apt-get install linux-source-$series bc flex bison" >&2
	exit 2
fi
for tool in bc flex bison gcc make; do
	command -v $tool >/dev/null || { echo "build.sh: $tool missing: apt-get install bc flex bison build-essential" >&2; exit 2; }
done
pkgver=$(dpkg-query -W -f='${Version}' linux-source-$series)
hash=$(sha256sum "$frag" | cut -c1-12)
dir=$cache/kernels/$pkgver-$hash
if [ -x "$dir/linux" ] && [ -f "$dir/meta" ]; then
	echo "uml:$series: cached $dir/linux"
	exit 0
fi
mkdir -p "$dir"
exec 9>"$dir/lock"
flock 9
if [ -x "$dir/linux" ] && [ -f "$dir/meta" ]; then
	echo "uml:$series: cached $dir/linux"
	exit 0
fi
start=$(date +%s)
src=$dir/build/linux-source-$series
if [ ! -f "$src/Makefile" ]; then
	echo "uml:$series: extracting $tarball"
	rm -rf "$dir/build"
	mkdir -p "$dir/build"
	tar -C "$dir/build" -xf "$tarball"
fi
cd "$src"
mk() { make ARCH=um SUBARCH=x86_64 "$@"; }

# check FILE: every fragment option has its value in the .config, else fail naming it.
check() {
	local syms missing=0 line sym want
	syms=$(mktemp)
	find . -name 'Kconfig*' -print0 | xargs -0 grep -hE '^[[:space:]]*(menu)?config[[:space:]]+[A-Z0-9_]+' |
		awk '{print "CONFIG_" $2}' | sort -u >"$syms"
	while IFS= read -r line; do
		case "$line" in
		CONFIG_*=y) sym=${line%%=*}; want=y ;;
		"# CONFIG_"*" is not set") sym=${line#\# }; sym=${sym%% *}; want=n ;;
		*) continue ;;
		esac
		if ! grep -qx "$sym" "$syms"; then
			echo "uml:$series: note: $sym is not defined in linux-source-$series, skipped"
			continue
		fi
		if [ $want = y ] && ! grep -qx "$sym=y" .config; then
			echo "uml:$series: $1: $sym=y from $frag did not end up in .config (got: $(grep -E "^(# )?$sym[= ]" .config || echo absent)); its dependencies are missing or it was renamed" >&2
			missing=1
		fi
		if [ $want = n ] && grep -qE "^$sym=(y|m)" .config; then
			echo "uml:$series: $1: $sym should not be set but is" >&2
			missing=1
		fi
	done <"$frag"
	rm -f "$syms"
	return $missing
}

mk defconfig >/dev/null
scripts/kconfig/merge_config.sh -m .config "$frag" >/dev/null
mk olddefconfig >/dev/null
check "after olddefconfig"
# PROXYBENCH_KERNEL_JOBS overrides make's -j (default: one job per CPU).
jobs=${PROXYBENCH_KERNEL_JOBS:-$(nproc)}
echo "uml:$series: building in $src (make -j$jobs linux)"
mk -j"$jobs" linux
check "after the build"
release=$(mk -s kernelrelease)
strip -o "$dir/linux.tmp" linux
mv "$dir/linux.tmp" "$dir/linux"
end=$(date +%s)
cat >"$dir/meta" <<META
series=$series
pkgver=$pkgver
release=$release
fragment_sha256=$hash
build_seconds=$((end - start))
built=$(date -u +%Y-%m-%dT%H:%M:%SZ)
META
cp .config "$dir/config"
if [ -z "${PROXYBENCH_KEEP_KERNEL_BUILD:-}" ]; then
	cd /
	rm -rf "$dir/build"
fi
echo "uml:$series: built $dir/linux ($release) in $((end - start)) s"
