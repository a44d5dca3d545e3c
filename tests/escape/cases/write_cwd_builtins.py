# tries: write a new file in the working directory through the builtins' open,
#        its name built at run time (the pre-screen looks for `open(` in the text)
# must: fail in unattended
# receipt: create
# control: works in approved
import builtins
o = builtins.__dict__['op' + 'en']
target = '@@WORKDIR@@/pwned-builtins.txt'
try:
    with o(target, 'x' + 't') as f:
        f.write('written by an unattended snippet')
    print('ESCAPED created', target)
except OSError as e:
    print('BLOCKED', type(e).__name__, e.errno)
