# common/common.mk — the common modules programs link by name: the error
# helper, the clocks, the settings-file reader, the command-line option
# table.
# Included by the top-level Makefile before the components' fragments
# (sorted by path), so that they can name ERR_SRC in their source lists.

ERR_SRC := common/err.c

# The monotonic and wall clocks of the programs' edges (never of a core).
CLOCK_SRC := common/clock.c

$(call unit_test,test_err,tests/unit/test_err.c $(ERR_SRC))

# The `key = value` reader of both daemons' settings files.
CONF_SRC := common/conf.c $(ERR_SRC)

$(call unit_test,test_conf,tests/unit/test_conf.c $(CONF_SRC))

# The option table of the small programs' command lines (the lend programs).
ARGS_SRC := common/args.c $(ERR_SRC)

$(call unit_test,test_args,tests/unit/test_args.c $(ARGS_SRC))
