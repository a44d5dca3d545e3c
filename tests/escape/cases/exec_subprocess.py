# tries: start another program with subprocess, the module imported by a
#        name built at run time (the pre-screen needs `subprocess.` in the text)
# must: fail in unattended
# receipt: exec
# control: works in approved
import builtins
m = builtins.__dict__["__imp" + "ort__"]
sp = m('sub' + 'process')
try:
    r = sp.run(['/bin/echo', 'spawned'], capture_output=True, text=True)
    print('ESCAPED ran /bin/echo:', r.stdout.strip())
except OSError as e:
    print('BLOCKED', type(e).__name__, e.errno)
