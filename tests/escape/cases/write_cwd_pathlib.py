# tries: write into the working directory after fooling the pre-screen:
#        pathlib's writer reached by a name built at run time, a relative path
# must: fail in unattended
# receipt: create
# control: works in approved
import pathlib
p = pathlib.Path('pwned-pathlib.txt')
w = getattr(p, 'write' + '_text')
try:
    w('written by an unattended snippet')
    print('ESCAPED wrote', p.resolve())
except OSError as e:
    print('BLOCKED', type(e).__name__, e.errno)
