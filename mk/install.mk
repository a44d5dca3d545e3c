# `make install` and `make uninstall`, and `make check-install`.
#
#   make install                      # as root: into /usr/local and /etc
#   make install PREFIX=/usr          # distribution layout
#   make install DESTDIR=/tmp/stage   # staged, for packaging (any user)
#
# Layout (PREFIX=/usr/local):
#   bin/kotoba                             the client            0755
#   libexec/kotoba/kotoba-admin            the client's scan,
#                                          approvals, audit      0755
#   sbin/kotoba-brokerd                    the daemon            0755
#   libexec/kotoba/kotoba-monitor          internal, the broker's
#                                          privileged half       0755
#   libexec/kotoba/kotoba-egress           internal, the egress
#                                          proxy                 0755
#   libexec/kotoba/kotoba-worker           internal, per snippet 0755
#   lib/systemd/system/kotoba-brokerd.{service,socket}           0644
#   lib/sysusers.d/kotoba.conf, lib/tmpfiles.d/kotoba.conf       0644
#   share/man/man{1,5,8}/...                                     0644
#   share/kotoba/selinux/kotoba.{te,fc,if}  policy module source 0644
#   /etc/kotoba/broker.conf.example         every key, default   0644
#   /etc/kotoba/broker.conf                 only when absent     0644
#   with mk/client.mk: include/kotoba-client.h, lib/libkotoba-client.{a,so*},
#   lib/pkgconfig/kotoba-client.pc, the Python package kotoba_broker
#
# Units go to $(PREFIX)/lib/systemd/system, not /etc/systemd/system: they
# are the package's vendor units (systemd reads /usr/local/lib/systemd/system
# and /usr/lib/systemd/system), and /etc/systemd/system stays the admin's, so
# `systemctl edit` drop-ins and overrides win over what an upgrade installs.
#
# The worker's path is written into the installed config (and example) as
# `worker = $(LIBEXECDIR)/kotoba/kotoba-worker`: an installed broker is not
# next to its worker.  The config is 0644 root-owned (the broker refuses a
# world-writable one and re-reads it as the service user on SIGHUP).
#
# Nothing here creates users or directories on the host: after installing,
# run the lines `make install` prints (systemd-sysusers, systemd-tmpfiles,
# systemctl).  Other mk/ fragments that install files add their own
# prerequisite: `install: install-foo`.

DESTDIR ?=
BINDIR ?= $(PREFIX)/bin
SBINDIR ?= $(PREFIX)/sbin
LIBEXECDIR ?= $(PREFIX)/libexec
DATADIR ?= $(PREFIX)/share
MANDIR ?= $(DATADIR)/man
SYSCONFDIR ?= /etc
SYSTEMDUNITDIR ?= $(PREFIX)/lib/systemd/system
SYSUSERSDIR ?= $(PREFIX)/lib/sysusers.d
TMPFILESDIR ?= $(PREFIX)/lib/tmpfiles.d

# The client library's directories (mk/client.mk sets LIBDIR and
# INCLUDEDIR too; whichever is read first wins, with the same values).
LIBDIR ?= $(PREFIX)/lib
INCLUDEDIR ?= $(PREFIX)/include
# Where Debian's /usr/bin/python3 looks for packages: /usr/lib/python3/
# dist-packages for PREFIX=/usr, /usr/local/lib/python3.X/dist-packages
# for /usr/local, PREFIX/lib/python3.X/site-packages elsewhere.
PYTHON_FOR_INSTALL ?= /usr/bin/python3
PYTHONDIR ?= $(shell $(PYTHON_FOR_INSTALL) -c 'import sys; p = sys.argv[1]; \
	v = "python%d.%d" % sys.version_info[:2]; \
	print("/usr/lib/python3/dist-packages" if p == "/usr" else \
	      p + "/lib/" + v + ("/dist-packages" if p == "/usr/local" else "/site-packages"))' \
	$(PREFIX) 2>/dev/null)

KOTOBA_WORKER_PATH = $(LIBEXECDIR)/kotoba/kotoba-worker
INSTALL_MAN := man/kotoba.1 man/kotoba-mcp.1 man/kotoba-broker.conf.5 man/kotoba-brokerd.8
INSTALL_SELINUX := selinux/kotoba.te selinux/kotoba.fc selinux/kotoba.if

# The units name /usr/local/sbin and /etc literally (so dist/systemd is
# itself a valid, verifiable unit); installed copies name the real paths.
UNIT_SED = -e 's|/usr/local/sbin/|$(SBINDIR)/|g' -e 's|/etc/kotoba/|$(SYSCONFDIR)/kotoba/|g'
CONF_SED = -e 's|^worker =.*|worker = $(KOTOBA_WORKER_PATH)|'

.PHONY: install install-files install-client uninstall uninstall-client check-install

install: all install-files
	@if [ -z "$(DESTDIR)" ]; then \
		echo "installed.  To run the system daemon:"; \
		echo "  systemd-sysusers kotoba.conf"; \
		echo "  systemd-tmpfiles --create kotoba.conf"; \
		echo "  systemctl daemon-reload"; \
		echo "  systemctl enable --now kotoba-brokerd.socket"; \
		echo "  usermod -a -G kotoba USER    # for each user of the broker"; \
		if [ -n "$(KOTOBA_CLIENT_LIBS)" ]; then echo "  ldconfig"; fi; \
	fi

# install-files copies what is built (and builds what is missing).  Kept
# apart so the staged-install test can call it without re-running the
# dependency check.
install-files: $(BINS) $(RECEIPT_PY) install-client
	install -d -m 0755 $(DESTDIR)$(BINDIR) $(DESTDIR)$(SBINDIR) \
		$(DESTDIR)$(LIBEXECDIR)/kotoba $(DESTDIR)$(SYSTEMDUNITDIR) \
		$(DESTDIR)$(SYSUSERSDIR) $(DESTDIR)$(TMPFILESDIR) \
		$(DESTDIR)$(MANDIR)/man1 $(DESTDIR)$(MANDIR)/man5 $(DESTDIR)$(MANDIR)/man8 \
		$(DESTDIR)$(DATADIR)/kotoba/selinux $(DESTDIR)$(SYSCONFDIR)/kotoba
	install -m 0755 $(BUILD)/kotoba $(DESTDIR)$(BINDIR)/kotoba
	install -m 0755 $(BUILD)/kotoba-admin $(DESTDIR)$(LIBEXECDIR)/kotoba/kotoba-admin
	install -m 0755 $(BUILD)/kotoba-brokerd $(DESTDIR)$(SBINDIR)/kotoba-brokerd
	install -m 0755 $(BUILD)/kotoba-worker $(DESTDIR)$(LIBEXECDIR)/kotoba/kotoba-worker
	install -m 0755 $(BUILD)/kotoba-monitor $(DESTDIR)$(LIBEXECDIR)/kotoba/kotoba-monitor
	install -m 0755 $(BUILD)/kotoba-egress $(DESTDIR)$(LIBEXECDIR)/kotoba/kotoba-egress
	install -m 0644 $(RECEIPT_PY) $(DESTDIR)$(LIBEXECDIR)/kotoba/kotoba_receipt.py
	$(RECEIPT_PYTHON) -c 'import py_compile, sys; py_compile.compile(sys.argv[1], doraise=True)' \
		$(DESTDIR)$(LIBEXECDIR)/kotoba/kotoba_receipt.py
	for u in kotoba-brokerd.service kotoba-brokerd.socket; do \
		sed $(UNIT_SED) dist/systemd/$$u > $(DESTDIR)$(SYSTEMDUNITDIR)/$$u.tmp && \
		chmod 0644 $(DESTDIR)$(SYSTEMDUNITDIR)/$$u.tmp && \
		mv -f $(DESTDIR)$(SYSTEMDUNITDIR)/$$u.tmp $(DESTDIR)$(SYSTEMDUNITDIR)/$$u || exit 1; \
	done
	install -m 0644 dist/systemd/kotoba.sysusers $(DESTDIR)$(SYSUSERSDIR)/kotoba.conf
	install -m 0644 dist/systemd/kotoba.tmpfiles $(DESTDIR)$(TMPFILESDIR)/kotoba.conf
	install -m 0644 man/kotoba.1 $(DESTDIR)$(MANDIR)/man1/kotoba.1
	install -m 0644 man/kotoba-mcp.1 $(DESTDIR)$(MANDIR)/man1/kotoba-mcp.1
	install -m 0644 man/kotoba-broker.conf.5 $(DESTDIR)$(MANDIR)/man5/kotoba-broker.conf.5
	install -m 0644 man/kotoba-brokerd.8 $(DESTDIR)$(MANDIR)/man8/kotoba-brokerd.8
	install -m 0644 $(INSTALL_SELINUX) $(DESTDIR)$(DATADIR)/kotoba/selinux/
	sed $(CONF_SED) dist/broker.conf > $(DESTDIR)$(SYSCONFDIR)/kotoba/broker.conf.example.tmp
	chmod 0644 $(DESTDIR)$(SYSCONFDIR)/kotoba/broker.conf.example.tmp
	mv -f $(DESTDIR)$(SYSCONFDIR)/kotoba/broker.conf.example.tmp \
		$(DESTDIR)$(SYSCONFDIR)/kotoba/broker.conf.example
	@# The live config only when there is none: never overwrite the admin's.
	@if [ -e $(DESTDIR)$(SYSCONFDIR)/kotoba/broker.conf ]; then \
		echo "keeping $(DESTDIR)$(SYSCONFDIR)/kotoba/broker.conf" \
		     "(compare with broker.conf.example)"; \
	else \
		echo "creating $(DESTDIR)$(SYSCONFDIR)/kotoba/broker.conf from the example"; \
		cp $(DESTDIR)$(SYSCONFDIR)/kotoba/broker.conf.example \
		   $(DESTDIR)$(SYSCONFDIR)/kotoba/broker.conf.tmp && \
		chmod 0644 $(DESTDIR)$(SYSCONFDIR)/kotoba/broker.conf.tmp && \
		mv -n $(DESTDIR)$(SYSCONFDIR)/kotoba/broker.conf.tmp \
		      $(DESTDIR)$(SYSCONFDIR)/kotoba/broker.conf; \
		rm -f $(DESTDIR)$(SYSCONFDIR)/kotoba/broker.conf.tmp; \
	fi

# The client library, its header and pkg-config file, and the Python
# package (mk/client.mk), when that fragment is there: its modules and
# py.typed, where Debian's python3 finds them (pip is for a venv).  The .pc file is made
# again from its template with this install's directories.
install-client: $(KOTOBA_CLIENT_LIBS) $(KOTOBA_CLIENT_SO_LINK)
	@if [ -n "$(KOTOBA_CLIENT_LIBS)" ]; then \
		set -e; \
		install -d -m 0755 $(DESTDIR)$(INCLUDEDIR) $(DESTDIR)$(LIBDIR)/pkgconfig; \
		echo "install client library, header, kotoba-client.pc and Python package"; \
		install -m 0644 $(KOTOBA_CLIENT_HEADERS) $(DESTDIR)$(INCLUDEDIR)/; \
		for f in $(KOTOBA_CLIENT_LIBS); do \
			case $$f in *.a) m=0644 ;; *) m=0755 ;; esac; \
			install -m $$m $$f $(DESTDIR)$(LIBDIR)/; \
		done; \
		ln -sfn $(KOTOBA_CLIENT_SONAME) $(DESTDIR)$(LIBDIR)/$(notdir $(KOTOBA_CLIENT_SO_LINK)); \
		sed $(KOTOBA_CLIENT_PC_SED) \
			client/kotoba-client.pc.in > $(DESTDIR)$(LIBDIR)/pkgconfig/kotoba-client.pc; \
		chmod 0644 $(DESTDIR)$(LIBDIR)/pkgconfig/kotoba-client.pc; \
		if [ -n "$(KOTOBA_CLIENT_PYTHON)" ] && [ -n "$(PYTHONDIR)" ]; then \
			pkg=$(notdir $(KOTOBA_CLIENT_PYTHON)); \
			rm -rf $(DESTDIR)$(PYTHONDIR)/$$pkg; \
			for f in $$(cd $(dir $(KOTOBA_CLIENT_PYTHON)) && find $$pkg -name __pycache__ -prune \
					-o -type f \( -name '*.py' -o -name py.typed \) -print); do \
				install -D -m 0644 $(dir $(KOTOBA_CLIENT_PYTHON))$$f $(DESTDIR)$(PYTHONDIR)/$$f; \
			done; \
		fi; \
	fi

uninstall-client:
	@if [ -n "$(KOTOBA_CLIENT_LIBS)" ]; then \
		rm -f $(DESTDIR)$(INCLUDEDIR)/$(notdir $(KOTOBA_CLIENT_HEADERS)) \
			$(addprefix $(DESTDIR)$(LIBDIR)/,$(notdir $(KOTOBA_CLIENT_LIBS) $(KOTOBA_CLIENT_SO_LINK))) \
			$(DESTDIR)$(LIBDIR)/pkgconfig/kotoba-client.pc; \
		if [ -n "$(KOTOBA_CLIENT_PYTHON)" ] && [ -n "$(PYTHONDIR)" ]; then \
			rm -rf $(DESTDIR)$(PYTHONDIR)/$(notdir $(KOTOBA_CLIENT_PYTHON)); \
		fi; \
	fi

# Removes what install put there, except broker.conf (the admin's) and the
# state in /var/lib/kotoba (grants and audit trail).
uninstall: uninstall-client
	rm -f $(DESTDIR)$(BINDIR)/kotoba $(DESTDIR)$(SBINDIR)/kotoba-brokerd \
		$(DESTDIR)$(LIBEXECDIR)/kotoba/kotoba-admin \
		$(DESTDIR)$(LIBEXECDIR)/kotoba/kotoba-worker \
		$(DESTDIR)$(LIBEXECDIR)/kotoba/kotoba-monitor \
		$(DESTDIR)$(LIBEXECDIR)/kotoba/kotoba-egress \
		$(DESTDIR)$(LIBEXECDIR)/kotoba/kotoba_receipt.py \
		$(DESTDIR)$(SYSTEMDUNITDIR)/kotoba-brokerd.service \
		$(DESTDIR)$(SYSTEMDUNITDIR)/kotoba-brokerd.socket \
		$(DESTDIR)$(SYSUSERSDIR)/kotoba.conf $(DESTDIR)$(TMPFILESDIR)/kotoba.conf \
		$(DESTDIR)$(MANDIR)/man1/kotoba.1 $(DESTDIR)$(MANDIR)/man1/kotoba-mcp.1 \
		$(DESTDIR)$(MANDIR)/man5/kotoba-broker.conf.5 \
		$(DESTDIR)$(MANDIR)/man8/kotoba-brokerd.8 \
		$(addprefix $(DESTDIR)$(DATADIR)/kotoba/selinux/,$(notdir $(INSTALL_SELINUX))) \
		$(DESTDIR)$(SYSCONFDIR)/kotoba/broker.conf.example
	rm -rf $(DESTDIR)$(LIBEXECDIR)/kotoba/__pycache__
	-rmdir $(DESTDIR)$(LIBEXECDIR)/kotoba $(DESTDIR)$(DATADIR)/kotoba/selinux \
		$(DESTDIR)$(DATADIR)/kotoba 2>/dev/null

# A staged install (DESTDIR) checked file by file: modes, paths written
# into the units and config, --help of each installed program, the man
# pages (groff warnings, every option and config key documented), the
# sysusers/tmpfiles files, reinstall over an edited config, uninstall.
CHECK_EXTRA += check-install
check-install: all
	@./tests/deps.sh groff-base systemd
	BUILD=$(abspath $(BUILD)) ./tests/install/test_install.sh
