# Sourced by setup/arm64-vm.sh and setup/dynamorio-native.sh: what both ask of an AArch64 DynamoRIO
# install tree (a DYNAMORIO_HOME, or setup/dynamorio.sh's home) and how both build the harness's
# ROI client against one. The caller sources setup/cache.sh first (bad, die) and sets ME.

# DynamoRIO runs SVE code from 11.0 on (signal context, scatter/gather: the reference note).
DR_MIN_VERSION="11.0"

# Version of the DynamoRIO install tree $1 (from its CMake package), or nothing.
dr_version() {
    # `set(PACKAGE_VERSION 11.91.0)` in DynamoRIO's own builds; quoted in other CMake packages.
    sed -n 's/^ *set *( *PACKAGE_VERSION *"\{0,1\}\([0-9.]*\)"\{0,1\} *).*/\1/p' "$1/cmake/DynamoRIOConfigVersion.cmake" 2>/dev/null
}
version_at_least() { [[ "$(printf '%s\n%s\n' "$2" "$1" | sort -V | head -n 1)" == "$2" ]]; }

# Refuse (exit 2, one line) DYNAMORIO_HOME=$1 unless it is an AArch64 DynamoRIO of DR_MIN_VERSION
# or newer; WHO ($2) is what needs it, as the line says.
check_dr_home() {
    local home=$1 who=$2 machine have
    [[ -x "$home/bin64/drrun" && -f "$home/cmake/DynamoRIOConfig.cmake" ]] \
        || bad "DYNAMORIO_HOME=$home is not a DynamoRIO install tree (no bin64/drrun or cmake/DynamoRIOConfig.cmake)"
    # e_machine, little-endian: 0xb7 is EM_AARCH64.
    machine=$(od -An -tx1 -j18 -N2 "$home/bin64/drrun" | tr -d ' ')
    [[ "$machine" == "b700" ]] || bad "DYNAMORIO_HOME=$home is not an AArch64 DynamoRIO (bin64/drrun is not an AArch64 ELF)"
    have=$(dr_version "$home")
    [[ -n "$have" ]] && version_at_least "$have" "$DR_MIN_VERSION" \
        || bad "DYNAMORIO_HOME=$home is DynamoRIO ${have:-of unknown version}; $who needs $DR_MIN_VERSION or newer"
}

# Build the ROI client (armie_clients/dynamorio) against the DynamoRIO tree $1 in the folder $2,
# its log $3, with the extra cmake options after them (the cross compiler for the guest); the
# library is $2/libroi_inscount.so. One line naming the log when it fails.
build_client() {
    local tree=$1 build=$2 log=$3
    shift 3
    rm -rf "$build"
    say "building the ROI client (armie_clients/dynamorio) against DynamoRIO $(dr_version "$tree")"
    if ! (cmake -S "$ROOT/armie_clients/dynamorio" -B "$build" -DDynamoRIO_DIR="$tree/cmake" \
              -DCMAKE_BUILD_TYPE=Release "$@" && cmake --build "$build") >"$log" 2>&1; then
        rm -rf "$build"
        die "the ROI client did not build against $tree; see $log"
    fi
    grep -q 'warning:' "$log" && say "the ROI client built with warnings; see $log"
    return 0
}
