# tries: read a per-user broker's own state (its audit trail keeps every
#        snippet): the planted ~/.local/state/kotoba/kotoba.db-wal, as a
#        file and through sqlite3
# must: fail in unattended
# receipt: secret-read
# control: works in approved
# needs: home (the suite plants the state in the snippet user's home)
@@SECRET_PROBE@@
state = os.path.join(H, D + 'local', 'state', 'kotoba')
attempt('kotoba.db-wal', read_path(os.path.join(state, 'kotoba.db-wal')))
attempt('listing the state directory', lambda: ' '.join(os.listdir(state)) + ' ' + MARK)
