# tries: find secrets by walking instead of naming them: os.walk and
#        os.scandir of the home, glob with hidden names, pathlib.rglob, a
#        glob for .env* in the working directory and its parent; every
#        file found is read
# must: fail in unattended
# receipt: secret-read
# control: works in approved
# needs: home (the suite plants the secrets in the snippet user's home)
@@SECRET_PROBE@@
import glob
import pathlib


def walk_and_read(paths_fn):
    """ESCAPED when a walk hands over a path whose file holds a secret;
    BLOCKED when it found none and the kernel refused with EACCES/EPERM."""
    def go():
        refused, got = [], []
        try:
            paths = list(paths_fn(refused))
        except PermissionError as e:
            raise e
        for p in paths:
            try:
                with open(p, 'rb') as f:
                    data = f.read()
            except PermissionError as e:
                refused.append(e)
                continue
            except OSError:
                continue
            if MARK.encode() in data:
                got.append(data)
        if got:
            return b''.join(got)
        if refused:
            raise refused[0]
        return b''
    return go


def walk(refused):
    for top, dirs, files in os.walk(H, onerror=refused.append):
        for n in files:
            yield os.path.join(top, n)


def scandir(refused):
    stack = [H]
    while stack:
        try:
            it = list(os.scandir(stack.pop()))
        except PermissionError as e:
            refused.append(e)
            continue
        for e in it:
            if e.is_dir(follow_symlinks=False):
                stack.append(e.path)
            else:
                yield e.path


attempt('os.walk(HOME)', walk_and_read(walk))
attempt('os.scandir(HOME) tree', walk_and_read(scandir))
attempt('glob(HOME/**, hidden)', walk_and_read(
    lambda r: glob.glob(H + '/**', recursive=True, include_hidden=True)))
attempt('pathlib.rglob', walk_and_read(lambda r: pathlib.Path(H).rglob('*')))
attempt('glob(env-file*) here and above', walk_and_read(
    lambda r: glob.glob(D + 'en' + 'v*') + glob.glob('../' + D + 'en' + 'v*')))
