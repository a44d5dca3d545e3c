# tries: ordinary work beside masked secrets: read the project tree, list
#        /usr/lib/python3, list the home directory (the secrets' names
#        show), read a plain file there, import from the user's
#        site-packages and from a venv in the working directory, name
#        lookups (/etc/passwd stays readable); the user site's .pth,
#        usercustomize, sitecustomize and json.py never run
# must: work in unattended
# needs: home (the suite plants the home's files)
import os
import pwd
import sys
with open('@@WORKDIR@@/readme-fixture.txt') as f:
    print('OK project tree' if f.read() == 'kotoba escape suite fixture\n' else 'FAIL fixture')
lib = '/usr/lib/python%d.%d' % sys.version_info[:2]
print('OK listing %s' % lib if 'os.py' in os.listdir(lib) else 'FAIL listing ' + lib)
home = os.environ['HOME']
names = os.listdir(home)
print('OK listing the home: %d names' % len(names) if 'notes.txt' in names else
      'FAIL listing the home: %r' % names)
with open(os.path.join(home, 'notes.txt')) as f:
    print('OK ~/notes.txt' if f.read() == 'plain notes\n' else 'FAIL ~/notes.txt')
import kotoba_probe  # noqa: E402  (the user's site-packages)
print('OK user site-packages' if kotoba_probe.VALUE == 42 else 'FAIL kotoba_probe')
import json  # noqa: E402  (the standard library's, not the user site's json.py)
print('OK stdlib json first' if json.__file__.startswith(sys.base_prefix) else
      'FAIL json from %s' % json.__file__)
ran = os.environ.get('KOTOBA_HOOKS_RAN')
print('FAIL the user site ran %s' % ran if ran else 'OK no start-up hook of the user site ran')
sys.path.insert(0, '@@WORKDIR@@/venv/lib/python%d.%d/site-packages' % sys.version_info[:2])
import kotoba_venv_probe  # noqa: E402
print('OK venv site-packages' if kotoba_venv_probe.VALUE == 7 else 'FAIL kotoba_venv_probe')
me = pwd.getpwuid(os.getuid())
print('OK pwd: %s, home %s' % (me.pw_name, me.pw_dir) if me.pw_dir == home else
      'FAIL pwd: %r' % (me,))
print('OK uid owns the home' if os.stat(home).st_uid == os.getuid() else
      'FAIL home owner %d, uid %d' % (os.stat(home).st_uid, os.getuid()))
