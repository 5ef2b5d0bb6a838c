# common/common.mk — the common modules programs link by name: the error
# helper.
# Included by the top-level Makefile before the components' fragments
# (sorted by path), so that they can name ERR_SRC in their source lists.

ERR_SRC := common/err.c

$(call unit_test,test_err,tests/unit/test_err.c $(ERR_SRC))

