# coprof — top-level Makefile.
#
# This file only makes sure the Debian packages the project needs are present
# (mk/deps.sh), then hands every goal to mk/build.mk, where pkg-config can be
# asked safely because the packages are known to be installed by then.
#
# Goals:
#   make            build everything into build/
#   make check      build and run every test; ends with "N passed, N failed"
#   make check-faults  the fault-injection tests that need root (tmpfs mounts)
#   make check-sanitize  make check with ASan + UBSan, built into
#                   build-sanitize/ (mk/build.mk says how)
#   make bench      build and run the benchmarks under bench/
#   make demo       profile the host-pipeline example with coprof record and
#                   print its report (build/demo/)
#   make install    install into $(DESTDIR)$(PREFIX) (default /usr/local)
#   make check-kernel-style  checkpatch.pl --strict and sparse over copdrv.ko
#                   (kernel-driver/linux/README.md, "Style checks")
#   make deps       install the Debian packages (as root) or print the command
#   make clean      remove build/

GOALS := all check check-faults bench install fuzz demo clean-build \
	check-kernel-style

.PHONY: $(GOALS) check-sanitize deps clean
.DEFAULT_GOAL := all

deps:
	@sh mk/deps.sh

$(GOALS): deps
	@$(MAKE) --no-print-directory -f mk/build.mk $@

check-sanitize: deps
	@$(MAKE) --no-print-directory -f mk/build.mk BUILD=build-sanitize \
		SANITIZE=1 check-sanitize

clean:
	rm -rf build build-sanitize
