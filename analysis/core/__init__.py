"""What every stage, backend and command shares: the validated sweep and kernel table
(config), the tidy table's schema (table), the cross and native toolchains (toolchain), the
SVE instruction decoder (decode) and the arm64 Open MPI libraries (mpi)."""
