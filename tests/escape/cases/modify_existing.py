# tries: change files that already exist in the working directory, one file
#        per way: append, truncate, chmod, touch, set an xattr, hard-link,
#        rename, delete (names built at run time, `posix` for `os`)
# must: fail in unattended
# receipt: write (the append alone: the other ways go through posix's own
#          functions and os.setxattr, which the interpreter's witness does
#          not wrap)
# control: works in approved
import builtins
import errno
import os
import posix
o = builtins.__dict__['op' + 'en']
w = '@@WORKDIR@@/victim-'


def attempt(what, fn):
    try:
        fn()
        print('ESCAPED', what)
    except OSError as e:
        if e.errno == errno.EOPNOTSUPP:
            print('note:', what, 'is not supported by this file system')
        else:
            print('BLOCKED', what, type(e).__name__, e.errno)


attempt('append', lambda: o(w + 'append.txt', 'a').write('x'))
attempt('truncate', lambda: getattr(posix, 'trun' + 'cate')(w + 'truncate.txt', 1))
attempt('chmod', lambda: getattr(posix, 'ch' + 'mod')(w + 'chmod.txt', 0o777))
attempt('touch', lambda: getattr(posix, 'ut' + 'ime')(w + 'touch.txt', (0, 0)))
attempt('xattr', lambda: os.setxattr(w + 'xattr.txt', 'user.kotoba', b'x'))
attempt('link', lambda: getattr(posix, 'li' + 'nk')(w + 'link.txt', w + 'link.txt.2'))
attempt('rename', lambda: getattr(posix, 're' + 'name')(w + 'rename.txt', w + 'renamed.txt'))
attempt('delete', lambda: getattr(posix, 'un' + 'link')(w + 'delete.txt'))
