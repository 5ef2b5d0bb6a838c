# exchange/ — ramexd and its pure core. Included by the top-level Makefile.

SCHEMA_SQL := $(sort $(wildcard schema/*.sql))

# schema/ itself too: a migration renamed or removed changes no file's
# time, only the folder's, and the list embedded must follow it.
$(BUILD)/gen/schema.c: $(SCHEMA_SQL) schema scripts/embed-sql.sh
	@mkdir -p $(@D)
	bash scripts/embed-sql.sh $@ $(SCHEMA_SQL)

# The generated file is compiled like any other source, from build/gen.
$(BUILD)/obj/gen/schema.o: $(BUILD)/gen/schema.c
	@mkdir -p $(@D)
	$(CC) $(WARN) $(OPT) $(CPPFLAGS) $(call pkg_cflags,$(PKGS)) -c -o $@ $<
$(BUILD)/san/obj/gen/schema.o: $(BUILD)/gen/schema.c
	@mkdir -p $(@D)
	$(CC) $(WARN) $(SANFLAGS) $(CPPFLAGS) $(call pkg_cflags,$(PKGS)) -c -o $@ $<

MIGRATE_SRC := exchange/migrate.c gen/schema.c

$(call integration_test,test_migrate,tests/integration/test_migrate.c \
  tests/integration/testdb.c $(MIGRATE_SRC),libpq libcrypto)
