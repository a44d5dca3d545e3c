# tries: scratch work in an unattended run whose secrets are masked:
#        tempfile, sqlite3 in TMPDIR, a multiprocessing.Process answering
#        over a multiprocessing.Pipe with its uid
# must: work in unattended
# needs: landlock (without it no file can be opened for writing at all)
import multiprocessing
import os
import sqlite3
import tempfile
with tempfile.NamedTemporaryFile('w+') as f:
    f.write('scratch')
    f.seek(0)
    print('OK tempfile' if f.read() == 'scratch' else 'FAIL tempfile')
db = sqlite3.connect(os.path.join(os.environ['TMPDIR'], 'work.db'))
db.execute('create table t (x)')
db.executemany('insert into t values (?)', [(i,) for i in range(100)])
db.commit()
n = db.execute('select sum(x) from t').fetchone()[0]
print('OK sqlite3 in scratch' if n == 4950 else 'FAIL sqlite3: %r' % n)
db.close()


def child(conn):
    conn.send(os.getuid())


if __name__ == '__main__':
    a, b = multiprocessing.Pipe()
    p = multiprocessing.Process(target=child, args=(b,))
    p.start()
    got = a.recv()
    p.join()
    print('OK multiprocessing Process and Pipe' if got == os.getuid() and p.exitcode == 0
          else 'FAIL multiprocessing: %r %r' % (got, p.exitcode))
