"""What every stage, backend and command shares: the validated sweep and kernel table
(config), the tidy table's schema (table), the cross and native toolchains (toolchain), the
SVE instruction decoder (decode), the arm64 Open MPI libraries (mpi) and atomic writes of
outputs (files)."""
