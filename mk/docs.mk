# The documentation checked against the tree.  Included by the Makefile.
#
#   make docs-check      README.md under 400 lines and each docs/*.md under
#                        800, with a contents list; every relative link and
#                        anchor resolves; SPEC.md names nothing outside the
#                        repository; every measurements/ file named exists
#                        and is indexed; every kvcmp option an example passes
#                        exists; every console example prints what it shows;
#                        no tracked file speaks of work sessions or issue
#                        numbers (part of make test)

.PHONY: docs-check

docs-check: $(BUILD)/kvcmp
	/usr/bin/python3 tools/docs_check.py --kvcmp $(BUILD)/kvcmp

TEST_EXTRA += docs-check
