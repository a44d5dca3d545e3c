# The SELinux policy module (selinux/kotoba.{te,fc,if}).
#
#   make selinux         builds build/selinux/kotoba.pp with the reference
#                        policy's development Makefile (Debian package
#                        selinux-policy-dev: installed when run as root,
#                        else the apt-get line is printed)
#   make check-selinux   builds it, then links it with the distribution's
#                        base policy and checks what the domains may do
#                        (tests/install/test_selinux.sh)
#
# Load it on an SELinux host (as root):
#   semodule -i build/selinux/kotoba.pp
#   restorecon -Rv /usr/local/sbin/kotoba-brokerd /usr/local/libexec/kotoba \
#       /etc/kotoba /var/lib/kotoba /run/kotoba

SELINUX_BUILD = $(BUILD)/selinux
SELINUX_SRC := selinux/kotoba.te selinux/kotoba.fc selinux/kotoba.if
SELINUX_DEVEL_MK := /usr/share/selinux/devel/Makefile

.PHONY: selinux check-selinux

selinux: $(SELINUX_BUILD)/kotoba.pp

# The development Makefile builds in the current directory, so it runs in
# a copy.  The caller's make variables (PREFIX=, BUILD=...) must not leak
# into it, hence the scrubbed MAKEFLAGS.  Any warning (a deprecated
# interface, say) fails the build as an error does.
$(SELINUX_BUILD)/kotoba.pp: $(SELINUX_SRC)
	@./tests/deps.sh selinux-policy-dev
	@rm -rf $(SELINUX_BUILD)/src && mkdir -p $(SELINUX_BUILD)/src
	cp $(SELINUX_SRC) $(SELINUX_BUILD)/src/
	cd $(SELINUX_BUILD)/src && \
		env -u MAKEFLAGS -u MFLAGS -u MAKELEVEL -u MAKEOVERRIDES \
		make -f $(SELINUX_DEVEL_MK) kotoba.pp > build.log 2>&1; \
		rc=$$?; cat build.log; \
		if [ $$rc -ne 0 ]; then exit $$rc; fi; \
		if grep -qi 'warning' build.log; then \
			echo "selinux: the module built with warnings (above); fix them" >&2; exit 1; \
		fi
	cp $(SELINUX_BUILD)/src/kotoba.pp $@

CHECK_EXTRA += check-selinux
check-selinux: selinux
	@./tests/deps.sh setools
	BUILD=$(abspath $(BUILD)) ./tests/install/test_selinux.sh
