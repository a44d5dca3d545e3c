# tries: hide the call in compiled bytecode: write a module into TMPDIR,
#        compile it to a .pyc, delete the source, import the bytecode
# must: fail in unattended
# receipt: exec
# needs: landlock (without it TMPDIR is read-only and nothing can be staged)
import codecs
import io
import os
import posix
import py_compile
import sys
d = os.environ['TMPDIR']
src = d + '/hidden_mod.py'
body = codecs.decode(
    "vzcbeg fhocebprff\n"
    "gel:\n"
    "    fhocebprff.eha(['/ova/gehr'], purpx=Gehr)\n"
    "    cevag('RFPNCRQ gur olgrpbqr fgnegrq /ova/gehr')\n"
    "rkprcg BFReebe nf r:\n"
    "    cevag('OYBPXRQ sebz gur olgrpbqr:', glcr(r).__anzr__, r.reeab)\n", 'rot13')
with io.FileIO(src, 'w') as f:
    f.write(body.encode())
py_compile.compile(src, cfile=d + '/hidden_mod.pyc', doraise=True)
getattr(posix, 'un' + 'link')(src)
sys.path.insert(0, d)
import hidden_mod  # noqa: E402,F401  (runs the bytecode)
