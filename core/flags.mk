# The compiler flags of cellrate, written once (docs/design.md §13).
#
# Read by the Makefile (include), by setup.py and tests/c/run.sh and
# bench/run.sh (which parse these lines), and by the rockspec through the
# Makefile. Keep to plain `NAME = value` lines: every reader parses them.

# C11, with the GNU declarations the core uses (getrandom, mkostemp, flock).
CR_STD = -std=c11 -D_GNU_SOURCE
# Warnings; the Makefile and the test runners add -Werror.
CR_WARN = -Wall -Wextra -Wpedantic -Wshadow -Wmissing-prototypes
# Nothing is exported but what core/cellrate.h (its parts) declares.
CR_VISIBILITY = -fvisibility=hidden
# Where the core is compiled into a module (the CPython extension, the Lua
# module), it exports nothing at all: only the module's entry point is public.
CR_EMBED = -DCR_EMBED
# x86-64 only: lets GCC inline the keyed table's 16-byte compare-and-swap.
CR_X86_64 = -mcx16
# What the core links with (libatomic: 16-byte atomics where not inlined).
CR_LIBS = -lm -lpthread -latomic
